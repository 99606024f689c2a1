// Package wal is kv's write-ahead log: numbered segment files of framed,
// checksummed records. It knows nothing about keys: a data record's
// payload is the caller's.
//
// # Guarantees
//
// A record is durable once Writer.Sync returns after the Append that wrote
// it. Segments are numbered from 1 without gaps (log.000001, log.000002,
// ...). When a segment passes the segment size it is sealed (a seal record,
// synced) before the next one is created and its name made durable by a
// directory sync. Each record carries a CRC-32C, its segment number and the
// offset up to which the segment was synced when it was written; FORMAT.md
// at the repository root gives every byte.
//
// # Crash contract
//
// Reader.Scan tells crash damage from corruption. In the newest segment, an
// incomplete record, zeros, or a record failing its checksum with no later
// record proving those bytes had been synced is a torn tail: Scan returns
// the valid prefix and reports SegmentInfo.Torn. A bad record in a sealed
// segment, a sealed segment cut short (even at a record boundary, or to
// zero bytes), and a bad record followed by a record written after it was
// synced are corruption: a *CorruptError matching ErrCorrupt, naming the
// file and offset. SealTail lets recovery cut a torn tail and seal the
// segment before it starts the next one, so that the tail is never later
// found in a sealed segment (cockroachdb/cockroach#68319).
//
// The Writer is fail-stop: after a failed write or sync it returns
// ErrFailed, and never retries an fsync.
//
// # Usage
//
//	w, err := wal.Create(fsys, dir, 1, wal.Options{})
//	pos, err := w.Append(payload1, payload2) // one write
//	err = w.Sync()                           // both durable
//
//	r := &wal.Reader{FS: fsys, Dir: dir}
//	info, err := r.Scan(1, true, func(rec wal.Record) error { ...; return nil })
package wal
