// Package kvraft makes one kv data directory a log store and stable store
// for github.com/hashicorp/raft (v1.7.2): Store implements raft.LogStore,
// raft.StableStore and raft.MonotonicLogStore, in place of raft-boltdb.
//
// # What it guarantees
//
// Under the kv store's default sync mode (kv.Always), every write returns
// only once durable: StoreLogs writes its whole batch as one kv
// transaction, one record in the write-ahead log and one fdatasync shared
// with concurrent writers (group commit); DeleteRange deletes its range
// in one transaction (or several past Options.DeleteBatch, from the end
// that keeps the log one run); Set and SetUint64 are one write each.
// GetLog of an index not stored returns raft.ErrLogNotFound; Get and
// GetUint64 of a key never set return ErrKeyNotFound, whose text is
// "not found" as raft-boltdb's is, because raft tests for that text.
// FirstIndex and LastIndex read bounds cached in memory, kept under a
// mutex with the writes that change them.
//
// Log entries are keyed by 'l' and the index in 8 big-endian bytes, so
// that key order is index order; stable-store keys by 's' and the key.
// Values are the encoding that README.md specifies byte by byte
// (AppendLog, DecodeLog), which keeps every field of raft.Log.
//
// IsMonotonic reports true: Raft then never leaves a gap in the log, and
// the store's log stays one run of consecutive indexes.
//
// # Crash contract
//
// The kv store's: a crash at any point (of the process or of the machine)
// followed by Open loses no acknowledged StoreLogs, DeleteRange or Set,
// brings back no entry an acknowledged DeleteRange removed, and leaves
// every batch whole or absent. Open recovers the kv directory, then
// reads the log's keys once to find its bounds. The crash tests
// (crash_test.go) check these rules on every crash state of a workload of
// appends, deletes from both ends and term updates, on kv's in-memory file
// system, and are shown failing on two broken stores.
//
// Anything else the kv store holds is refused by nothing: keep the
// directory for Raft alone, one process at a time (kv's lock).
//
// # Usage
//
//	store, err := kvraft.Open("raft-data", nil)
//	if err != nil { ... }
//	defer store.Close()
//	r, err := raft.NewRaft(conf, fsm, store, store, snapshots, transport)
package kvraft
