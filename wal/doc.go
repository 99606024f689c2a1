// Package wal is kv's write-ahead log: numbered segment files of framed,
// checksummed records. It knows nothing about keys: a data record's
// payload is the caller's.
//
// # Guarantees
//
// A record is durable once Writer.Sync returns after the Append that wrote
// it. Segments are numbered from 1 without gaps (log.000001, log.000002,
// ...). A segment's header record, holding a random salt, is synced when
// the segment is created, before any other record. When a segment passes
// the segment size, its records are synced, the next segment is created
// and its name made durable by a directory sync, and only then is the
// segment sealed (a seal record, synced): a sealed segment is never the
// newest, so a deleted newest segment shows. Each
// record carries two CRC-32Cs that start from the segment's salt (one of
// its header, one of the whole record) and the offset up to which the
// segment was synced when it was written; data payloads are stored
// scrambled with a key derived from the salt, so that no payload puts a
// valid frame or a run of zeros on disk. A mark record carries only a
// synced offset: it tells a reader how much of the segment is durable.
// FORMAT.md at the repository root gives every byte.
//
// # Crash contract
//
// Reader.Scan tells crash damage from corruption. In the newest segment,
// an incomplete record, zeros, or a damaged record in which a crash zeroed
// a sector, with no later record claiming those bytes synced, is a torn
// tail: Scan returns the valid prefix and reports SegmentInfo.Torn. A bad
// record in a sealed segment, a sealed segment cut short (even at a record
// boundary, or to zero bytes), a bad record followed by a record written
// after it was synced, and bytes that are all there but altered are
// corruption: a *CorruptError matching ErrCorrupt, naming the file and
// offset. Scan takes time linear in the segment's size and memory bounded
// by a window, whatever the bytes. SealTail lets recovery cut a torn tail,
// start the next segment and seal, in Rotate's order, so that the tail is
// never later found in a sealed segment (cockroachdb/cockroach#68319).
//
// Records past the highest synced offset a record claims may exist in the
// page cache alone: after a failed fdatasync the kernel marks pages clean
// without writing them. OpenAppend and SealTail write them again before
// anything claims them synced. Reader.Salvage reads every valid record
// of a damaged file, for repairs and salvage.
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
