// Package snapshot writes and reads kv's snapshot file: the whole map at
// one revision, the live leases and the keys bound to each (WriteLeases,
// ReadLeases), and the number of the highest WAL segment it covers.
//
// # Guarantees
//
// Write publishes a snapshot atomically and durably: snapshot.tmp is
// created afresh, written, synced, renamed to snapshot, and the directory
// is synced (vfs.Publish). The first record holds the covered segment and
// the revision, so that coverage and contents become durable in one
// rename. Read verifies every frame's checksum, the entry count and a
// checksum of the whole file; damage is ErrCorrupt in a *corrupt.Error
// naming the file and offset, never a half-loaded map.
//
// # Crash contract
//
// A crash during Write leaves the previous snapshot in place (and perhaps
// a snapshot.tmp, which nobody trusts). A snapshot is never damaged by a
// crash, so any damage found in one is corruption.
//
// # Usage
//
//	err := snapshot.Write(fsys, dir, snapshot.Meta{Covered: 3, Revision: rev, Count: n}, m.All(nil, nil))
//	err = snapshot.Read(fsys, dir, func(m snapshot.Meta) error {...}, func(e *record.Entry) error {...})
package snapshot
