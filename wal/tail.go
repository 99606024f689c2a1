package wal

import (
	"fmt"
	"io"

	"github.com/kvstore/kv/vfs"
)

// Tail follows a segment that a writer in another process may still be
// appending to, and reads its records as they become durable: a record
// is returned once a later record of the segment claims it synced (a
// data record's or a mark's Synced field), or once the segment is sealed
// and the next segment exists (the writer created it only after the seal
// was durable). So Tail returns what Scan of a read-only open would,
// and never a record that a power loss could take back.
//
// Tail judges nothing: it stops at the first bytes that are not a
// complete, valid record, which in a live segment are the writer's next
// append, and reads from there again at the next call. A record it has
// not returned may be rewritten (a restarted writer rewrites what lies
// past the last sync) or cut (a recovery cuts a torn tail, which no
// record claims synced), never one it has returned.
//
// It keeps the segment's file open, so that the segment stays readable
// after a checkpoint deletes it.
type Tail struct {
	seg    SegmentNum
	name   string
	f      vfs.File
	maxRec int
	key    *segKey
	off    int64 // the next record to return
	synced int64 // the highest synced offset a record claims
	sealed bool  // a seal record was read
	done   bool  // and every record up to it returned
	buf    []byte
	plain  []byte
}

// OpenTail opens segment seg of dir for following. A segment whose header
// is not yet complete (a writer is creating it) is an error matching
// io.ErrUnexpectedEOF: try again.
func OpenTail(fsys vfs.FS, dir string, seg SegmentNum, maxRecordSize int) (*Tail, error) {
	name := SegmentPath(dir, seg)
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if maxRecordSize <= 0 {
		maxRecordSize = DefaultMaxRecordSize
	}
	t := &Tail{seg: seg, name: name, f: f, maxRec: maxRecordSize, off: firstRecord}
	hb := make([]byte, firstRecord)
	n, err := f.ReadAt(hb, 0)
	if err != nil && err != io.EOF {
		f.Close()
		return nil, err
	}
	k, reason, err := parseSegmentHeader(name, seg, hb[:n])
	if err == nil && reason != "" {
		err = fmt.Errorf("wal: %s: segment header not readable yet (%s): %w", name, reason, io.ErrUnexpectedEOF)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	t.key = k
	return t, nil
}

// Segment returns the segment's number.
func (t *Tail) Segment() SegmentNum { return t.seg }

// Sealed reports whether the segment's seal record has been read: once
// the next segment exists, Next with nextExists true returns the rest
// and the segment is done.
func (t *Tail) Sealed() bool { return t.sealed }

// Done reports whether every record of a sealed segment was returned.
func (t *Tail) Done() bool { return t.done }

// Close closes the segment's file.
func (t *Tail) Close() error { return t.f.Close() }

// Next reads what was appended since the last call and calls fn with each
// record now known durable, in order. nextExists says that the segment
// after this one exists: a seal read before then vouches for everything
// before it. The payload passed to fn is valid only until fn returns. An
// error from fn stops the read and is returned; the record is returned
// again by the next call.
func (t *Tail) Next(nextExists bool, fn func(Record) error) error {
	fi, err := t.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	// First pass: find the complete records and the highest claim.
	type rec struct {
		off    int64
		length int
		typ    RecordType
	}
	var recs []rec
	for off := t.off; off+HeaderSize <= size; {
		hb := t.read(off, HeaderSize)
		if hb == nil {
			break
		}
		h, reason := parseHeader(hb, t.key)
		if reason != "" || h.length > t.maxRec || h.synced > off || off+HeaderSize+int64(h.length) > size {
			break
		}
		b := t.read(off, HeaderSize+h.length)
		if b == nil || checkRecord(b, t.key) != "" {
			break
		}
		t.synced = max(t.synced, h.synced)
		recs = append(recs, rec{off: off, length: h.length, typ: h.typ})
		off += int64(HeaderSize + h.length)
		if h.typ == TypeSeal {
			t.sealed = true
			break
		}
	}
	if t.sealed && nextExists && len(recs) > 0 {
		last := recs[len(recs)-1]
		t.synced = max(t.synced, last.off+HeaderSize+int64(last.length))
	}
	// Second pass: return the records the claims cover.
	for _, r := range recs {
		end := r.off + HeaderSize + int64(r.length)
		if end > t.synced {
			break
		}
		if r.typ == TypeData {
			b := t.read(r.off, HeaderSize+r.length)
			if b == nil {
				return fmt.Errorf("wal: %s: record at offset %d no longer readable", t.name, r.off)
			}
			if cap(t.plain) < r.length {
				t.plain = make([]byte, r.length)
			}
			p := t.plain[:r.length]
			t.key.scramble(p, b[HeaderSize:])
			if err := fn(Record{Segment: t.seg, Offset: r.off, Payload: p}); err != nil {
				return err
			}
		}
		t.off = end
		if r.typ == TypeSeal {
			t.done = true
		}
	}
	return nil
}

// read returns n bytes at off, or nil when they cannot be read.
func (t *Tail) read(off int64, n int) []byte {
	if cap(t.buf) < n {
		t.buf = make([]byte, n)
	}
	b := t.buf[:n]
	if k, err := t.f.ReadAt(b, off); k < n && err != nil {
		return nil
	}
	return b
}

// Vouch raises the offset up to which Next returns records to off, for a
// reader that made the segment durable up to there itself (a watch that
// found the writer dead: recovery.VouchTail), where no record of the
// segment claims it.
func (t *Tail) Vouch(off int64) { t.synced = max(t.synced, off) }
