// Package kv is an embedded, crash-safe key-value store. It serves its
// state from its last snapshot, a checksummed image it maps from disk
// and verifies as it reads, with the changes written since (the log
// after the last checkpoint) held in memory, and makes every
// acknowledged write durable through a segmented write-ahead log and
// periodic snapshots.
//
// # Guarantees
//
// Under the default sync mode (Always) a write returns only after its
// record is durable: its log segment fdatasync'ed, and the directory
// fsync'ed when the segment is new. Reads see only durable state, so a
// revision read from the store is a safe fencing token. Every committed
// record has a revision one higher than the last, and revisions never go
// backwards across any crash. Concurrent writers share one write and one
// fdatasync (group commit); transactions are evaluated in commit order
// against everything committed before them, and fenced writes fail with
// ErrFenced, atomically, once their token is stale. Revisions stop at
// record.MaxRevision (2^63−1): a store there refuses writes with
// ErrRevisionsExhausted.
//
// # Crash contract
//
// Open runs recovery (package recovery): load the snapshot, replay the log
// segments it does not cover, cut a torn tail; the checkpoint of what it
// replayed then runs in the background (FORMAT.md, "Recovery"), and so
// does the build of the ordered tree: Open returns once Get and writes can
// be served, and a Scan started meanwhile waits for the tree. A crash at any
// point, of the program or of a recovery, followed by Open, loses no
// acknowledged write and applies none twice. Damage a crash cannot cause
// makes Open fail with an error naming the file and offset, and changes
// nothing; `kv DIR repair` is the explicit way out. After a failed write
// or fsync the store refuses writes (ErrFailed) until it is reopened.
//
// Backup writes the map at one revision while writers go on, from the
// copy-on-write view a scan takes; Restore makes a new directory of one,
// whose revisions continue above the backup's (FORMAT.md, "Backup").
//
// One process at a time may have a directory open for writing: Open takes
// an flock on DIR/LOCK and fails with ErrLocked naming the holder's pid.
//
// # Leases
//
// A lease (Grant) is a wall-clock deadline that keys are bound to
// (PutLease, or Op.WithLease in a transaction); KeepAlive moves it on,
// Revoke ends it early. Deadlines are logged and absolute: a restart moves
// none (FORMAT.md, "Leases"). From the deadline on no read returns the
// lease's keys, in the writer or in a read-only reader; the writer
// commits the expiry, one record deleting them, as soon as its clock
// reaches the deadline and before it evaluates any later write. Only an
// open writer commits: a deadline that passes while no process has the
// store open is committed by the next Open, before any write.
//
// # Usage
//
//	s, err := kv.Open("data", nil)
//	if err != nil { ... }
//	defer s.Close()
//	rev, err := s.Put([]byte("k"), []byte("v")) // durable when it returns
//	e, err := s.Get([]byte("k"))
//	n, _, err := s.Add([]byte("counter"), 1)
//	res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Absent(k)}, Then: []kv.Op{kv.PutOp(k, v)}})
//	_, err = s.Fenced(kv.Fence{Key: lockKey, Token: token}).Put(k, v)
//	id, err := s.Grant(30 * time.Second) // a lease
//	_, err = s.PutLease(k, v, id)        // k is deleted when the lease ends
//	go s.KeepAliveLoop(ctx, id)          // renews it until ctx ends
//	rev, err = s.Backup(w)               // every key as of revision rev; writers go on
//	d, err := kv.Restore(file, "data2", nil) // a new directory from a backup
//
// The whole map lives in memory: pick kv for small-to-medium state (up to
// a few million keys, a few GiB), not as an out-of-core database. A key
// costs its bytes plus about 64 (package record, Map): 1M keys of 16 bytes
// with 100-byte values hold 180 MB.
package kv
