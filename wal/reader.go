package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/kvstore/kv/vfs"
)

// Record is a data record read back from a segment.
type Record struct {
	Segment SegmentNum
	Offset  int64  // byte offset of the record header in the segment
	Payload []byte // valid only until the callback returns
}

// SegmentInfo says what Scan found in one segment.
type SegmentInfo struct {
	Segment SegmentNum
	Size    int64 // file size in bytes
	// End is the offset just past the last valid record: the length of
	// the valid prefix, and where a writer appends.
	End     int64
	Records int  // data records
	Sealed  bool // a seal record ends the segment
	// Torn reports that bytes after End are damage a crash can leave in
	// the newest segment: an incomplete record, a record failing its
	// checksum, or leftovers of writes that were never synced. Zeros alone
	// after End are not torn: they are preallocated or never written.
	Torn bool
	// TornReason says what was found at End when Torn is set.
	TornReason string
}

// Reader reads segments. It reads a segment a window at a time (4 MiB, or
// one record when a record is bigger), with a buffer reused from one Scan
// to the next: a replay holds one window in memory, not a segment. Only
// damage at the end of the newest segment has the rest of the segment
// read whole, to judge it.
type Reader struct {
	FS  vfs.FS
	Dir string
	// MaxRecordSize bounds the length of a record; 0 means
	// DefaultMaxRecordSize. A longer length field is damage.
	MaxRecordSize int
	buf           []byte
	window        int // 0: scanWindow (tests make it tiny)
}

// Scan reads segment seg and calls fn with each data record in order.
//
// When newest is false the segment is sealed: it must start with its
// header, hold only valid records and end with a seal record (zeros may
// follow it). When newest is true, damage at the end is crash damage and is
// reported in SegmentInfo.Torn, unless a later valid record proves that the
// damaged bytes had been synced before it was written: then, as for any
// damage in a sealed segment, Scan returns a *CorruptError matching
// ErrCorrupt with the file and the offset of the first bad byte.
//
// An error returned by fn stops the scan and is returned as is.
func (r *Reader) Scan(seg SegmentNum, newest bool, fn func(Record) error) (SegmentInfo, error) {
	name := SegmentPath(r.Dir, seg)
	info := SegmentInfo{Segment: seg}
	f, err := r.FS.Open(name)
	if err != nil {
		return info, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return info, err
	}
	info.Size = fi.Size()
	vfs.WillNeed(f) // the disk reads ahead while records are applied
	maxRec := r.MaxRecordSize
	if maxRec <= 0 {
		maxRec = DefaultMaxRecordSize
	}
	src := &fileSource{f: f, name: name, size: info.Size, buf: r.buf, window: int64(cmp.Or(r.window, scanWindow))}
	defer func() { r.buf = src.buf[:0] }()
	return scan(name, seg, src, newest, maxRec, info, fn)
}

// source is a segment's bytes as scan reads them.
type source interface {
	// at returns the bytes from off to off+n, fewer where the segment
	// ends first; they stay valid until the next call.
	at(off int64, n int) ([]byte, error)
	len() int64
}

// memSource is a segment held in memory.
type memSource []byte

func (b memSource) at(off int64, n int) ([]byte, error) {
	return b[off:min(off+int64(n), int64(len(b)))], nil
}
func (b memSource) len() int64 { return int64(len(b)) }

// scanWindow is how much of a segment a Reader reads at once.
const scanWindow = 4 << 20

// fileSource reads a segment file a window at a time.
type fileSource struct {
	f      vfs.File
	name   string
	size   int64
	window int64
	buf    []byte // the bytes from base on
	base   int64
}

func (s *fileSource) len() int64 { return s.size }

func (s *fileSource) at(off int64, n int) ([]byte, error) {
	end := min(off+int64(n), s.size)
	if off >= s.base && end <= s.base+int64(len(s.buf)) {
		return s.buf[off-s.base : end-s.base], nil
	}
	w := min(max(end-off, s.window), s.size-off)
	if int64(cap(s.buf)) < w {
		s.buf = make([]byte, w)
	}
	s.buf, s.base = s.buf[:w], off
	if k, err := s.f.ReadAt(s.buf, off); err != nil && !(err == io.EOF && int64(k) == w) {
		s.buf = s.buf[:0]
		return nil, fmt.Errorf("wal: read %s at offset %d: %w", s.name, off, err)
	}
	return s.buf[:end-off], nil
}

// scanBytes applies the rules of Scan to the contents b of a segment.
func scanBytes(name string, seg SegmentNum, b []byte, newest bool, maxRec int, info SegmentInfo, fn func(Record) error) (SegmentInfo, error) {
	return scan(name, seg, memSource(b), newest, maxRec, info, fn)
}

// scan applies the rules of Scan to the segment src holds.
func scan(name string, seg SegmentNum, src source, newest bool, maxRec int, info SegmentInfo, fn func(Record) error) (SegmentInfo, error) {
	size := src.len()
	off := int64(0)
	reason := ""
	for off < size {
		b, err := src.at(off, HeaderSize)
		if err != nil {
			return info, err
		}
		if len(b) == HeaderSize {
			// Read as much as the header claims, within bounds: a record
			// whose length field is damage fails parseRecord as it would
			// with the whole segment in hand.
			if n := int64(binary.LittleEndian.Uint32(b[4:])); n <= int64(maxRec) {
				if b, err = src.at(off, HeaderSize+int(n)); err != nil {
					return info, err
				}
			}
		}
		var p parsed
		p, reason = parseRecord(b, seg, maxRec)
		if reason != "" {
			break
		}
		if p.synced > off {
			return info, corruptf(name, off, "record claims %d bytes synced before its own offset", p.synced)
		}
		switch {
		case info.Sealed:
			return info, corruptf(name, off, "%s record after the seal", p.typ)
		case off == 0:
			if p.typ != TypeHeader {
				return info, corruptf(name, 0, "segment does not start with a header record")
			}
			if err := checkSegmentHeader(name, seg, p.payload); err != nil {
				return info, err
			}
		case p.typ == TypeHeader:
			return info, corruptf(name, off, "second header record")
		case p.typ == TypeSeal:
			if len(p.payload) != 0 {
				return info, corruptf(name, off, "seal record with a payload")
			}
			info.Sealed = true
		default:
			info.Records++
			if fn != nil {
				if err := fn(Record{Segment: seg, Offset: off, Payload: p.payload}); err != nil {
					return info, err
				}
			}
		}
		off += int64(p.size)
		info.End = off
	}
	zero, err := zerosFrom(src, off)
	if err != nil {
		return info, err
	}
	if zero {
		// A clean end, or zeros: preallocated space, or writes that a crash
		// lost entirely. Only the newest segment may end unsealed.
		if !newest && !info.Sealed {
			return info, corruptf(name, off, "sealed segment ends without a seal record (cut short)")
		}
		return info, nil
	}
	if !newest || info.Sealed {
		if info.Sealed {
			reason = "bytes after the seal record"
		}
		return info, corruptf(name, off, "%s", reason)
	}
	// Damage at the end of the newest segment: judging it takes the rest
	// of the segment in hand.
	b, err := src.at(0, int(size))
	if err != nil {
		return info, err
	}
	return judgeTail(name, seg, b, int(off), reason, maxRec, info)
}

// zerosFrom reports whether the segment holds only zeros from off on.
func zerosFrom(src source, off int64) (bool, error) {
	for off < src.len() {
		b, err := src.at(off, scanWindow)
		if err != nil {
			return false, err
		}
		if !allZero(b) {
			return false, nil
		}
		off += int64(len(b))
	}
	return true, nil
}

// judgeTail decides whether the damage at off, at the end of the newest
// segment b, is crash damage (info.Torn) or corruption.
func judgeTail(name string, seg SegmentNum, b []byte, off int, reason string, maxRec int, info SegmentInfo) (SegmentInfo, error) {
	// Damage at the end of the newest segment is crash damage unless a
	// later valid record was written when these bytes were already synced,
	// or the damage has a shape no crash leaves.
	next := len(b) // the first valid record after the damage
	for p := off + 1; p+HeaderSize <= len(b); p++ {
		q, bad := parseRecord(b[p:], seg, maxRec)
		if bad != "" {
			continue
		}
		if q.synced > int64(off) {
			return info, corruptf(name, int64(off),
				"%s, but the record at offset %d was written after offset %d was synced", reason, p, q.synced)
		}
		if next == len(b) {
			next = p
		}
	}
	end := next
	if next == len(b) {
		if n, ok := extent(b[off:], seg, maxRec); ok {
			end = off + n // the damaged record ends before the file does
		}
	}
	if end < len(b) && !hasZeroSector(b, off, end) {
		return info, corruptf(name, int64(off),
			"%s, and bytes %d to %d are all present with no zeroed sector: a crash loses writes, it does not alter them", reason, off, end)
	}
	info.Torn = true
	info.TornReason = reason
	return info, nil
}

func checkSegmentHeader(name string, seg SegmentNum, p []byte) error {
	if len(p) != segmentHeaderSize || !bytes.Equal(p[:4], segmentMagic[:]) {
		return corruptf(name, 0, "bad segment header magic")
	}
	if v := binary.LittleEndian.Uint16(p[4:]); v != Version {
		return &CorruptError{Err: ErrVersion, File: name, Offset: 0,
			Reason: fmt.Sprintf("segment format version %d, this build reads version %d", v, Version)}
	}
	if binary.LittleEndian.Uint16(p[6:]) != 0 {
		return corruptf(name, 0, "reserved segment header bytes not zero")
	}
	if s := SegmentNum(binary.LittleEndian.Uint64(p[8:])); s != seg {
		return corruptf(name, 0, "segment header names segment %s", s)
	}
	return nil
}

// SectorSize is the unit in which a crash can lose a write: the newest
// segment's damaged bytes must include a run of zeros covering the part of
// a 512-byte-aligned sector that falls inside them, or reach the end of
// the file, to be taken for crash damage. Part of the on-disk format's
// rules.
const SectorSize = 512

// hasZeroSector reports whether some 512-byte-aligned sector's
// intersection with b[from:to] is all zeros.
func hasZeroSector(b []byte, from, to int) bool {
	for start := from; start < to; {
		end := min((start/SectorSize+1)*SectorSize, to)
		if allZero(b[start:end]) {
			return true
		}
		start = end
	}
	return false
}

// extent returns the length of the record at the start of b as its header
// claims it, when the header is plausible (a valid type, zero reserved
// bytes, this segment, a length within bounds) and the record fits in b.
func extent(b []byte, seg SegmentNum, maxRec int) (int, bool) {
	if len(b) < HeaderSize {
		return 0, false
	}
	t := RecordType(b[8])
	if t == TypeInvalid || t > maxType || b[9] != 0 || b[10] != 0 || b[11] != 0 ||
		SegmentNum(binary.LittleEndian.Uint32(b[12:])) != seg&maxSegment {
		return 0, false
	}
	n := int64(binary.LittleEndian.Uint32(b[4:]))
	if n > int64(maxRec) || HeaderSize+n > int64(len(b)) {
		return 0, false
	}
	return HeaderSize + int(n), true
}
