package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/kvstore/kv/vfs"
)

// Record is a data record read back from a segment.
type Record struct {
	Segment SegmentNum
	Offset  int64  // byte offset of the record header in the segment
	Payload []byte // the caller's bytes, valid only until the callback returns
}

// End returns the offset just past the record.
func (r Record) End() int64 { return r.Offset + HeaderSize + int64(len(r.Payload)) }

// SegmentInfo says what Scan found in one segment.
type SegmentInfo struct {
	Segment SegmentNum
	Size    int64 // file size in bytes
	// End is the offset just past the last valid record: the length of
	// the valid prefix, and where a writer appends.
	End     int64
	Records int  // data records
	Marks   int  // mark records
	Sealed  bool // a seal record ends the segment
	// Synced is the highest synced offset a valid record claims: its
	// writer had seen an fdatasync of the segment up to there return.
	// The bytes before it are durable; the records after it may be only
	// in the page cache (of a live writer, or of a process that crashed,
	// or pages a failed fdatasync left behind, which the kernel no longer
	// writes back).
	Synced int64
	// DataEnd is the offset just past the last valid record that is not a
	// mark: what lies between DataEnd and End is marks alone, which carry
	// nothing that must be durable.
	DataEnd int64
	// Torn reports that bytes after End are damage a crash can leave in
	// the newest segment: an incomplete record, a record failing its
	// checksum where a crash zeroed part of it, or leftovers of writes
	// that were never synced. Zeros alone after End are not torn: they
	// are preallocated or never written.
	Torn bool
	// TornReason says what was found at End when Torn is set.
	TornReason string
}

// Reader reads segments. It reads a segment a window at a time (256 KiB, or
// one record when a record is bigger), with a buffer reused from one Scan
// to the next: a scan holds a window and a record in memory, never a
// segment, and takes time linear in the segment's size, damaged or not.
type Reader struct {
	FS  vfs.FS
	Dir string
	// MaxRecordSize bounds the length of a record; 0 means
	// DefaultMaxRecordSize. A longer length field is damage.
	MaxRecordSize int
	buf           []byte
	payload       []byte // the unscrambled payload handed to the callback
	window        int    // 0: scanWindow (tests make it tiny)
}

// Scan reads segment seg and calls fn with each data record in order.
//
// When newest is false the segment is sealed: it must start with its
// header, hold only valid records and end with a seal record (zeros may
// follow it). When newest is true, damage at the end is crash damage and is
// reported in SegmentInfo.Torn, unless it has a shape no crash leaves (see
// FORMAT.md, "Torn tail or corruption"): then, as for any damage in a
// sealed segment, Scan returns a *CorruptError matching ErrCorrupt with the
// file and the offset of the first bad byte.
//
// An error returned by fn stops the scan and is returned as is.
func (r *Reader) Scan(seg SegmentNum, newest bool, fn func(Record) error) (SegmentInfo, error) {
	f, err := r.FS.Open(SegmentPath(r.Dir, seg))
	if err != nil {
		return SegmentInfo{Segment: seg}, err
	}
	defer f.Close()
	info, _, err := r.scanFile(f, seg, newest, fn)
	return info, err
}

// ScanToAppend is Scan of the newest segment seg (newest true) by a
// writer that goes on appending to it: it opens the segment for reading
// and writing, and returns it open, for OpenAppendFile, so that the
// append does not open it again (an open of a store that replays
// nothing read its newest segment, closed it, and opened it again).
// The file carries the header the scan read and checked, which
// OpenAppendFile takes rather than reading it again. The caller closes
// the file when it does not hand it on. On an error the file is closed
// and nil.
func (r *Reader) ScanToAppend(seg SegmentNum, fn func(Record) error) (SegmentInfo, vfs.File, error) {
	f, err := r.FS.OpenReadWrite(SegmentPath(r.Dir, seg))
	if err != nil {
		return SegmentInfo{Segment: seg}, nil, err
	}
	info, key, err := r.scanFile(f, seg, true, fn)
	if err != nil {
		f.Close()
		return info, nil, err
	}
	if key == nil {
		return info, f, nil // no header yet: the writer writes one
	}
	return info, &scannedFile{File: f, seg: seg, key: key}, nil
}

// scannedFile is the newest segment as ScanToAppend returns it: open, and
// its header's key, which OpenAppendFile takes.
type scannedFile struct {
	vfs.File
	seg SegmentNum
	key *segKey
}

// scanFile is Scan of f, segment seg open; it also returns the key of the
// segment's header, nil when the header did not read as one.
func (r *Reader) scanFile(f vfs.File, seg SegmentNum, newest bool, fn func(Record) error) (SegmentInfo, *segKey, error) {
	name := SegmentPath(r.Dir, seg)
	info := SegmentInfo{Segment: seg}
	var err error
	if info.Size, err = vfs.Size(f); err != nil {
		return info, nil, err
	}
	if info.Size > scanWindow {
		// The disk reads ahead while records are applied. A segment of
		// one window or less (the 16 KiB a checkpoint starts, which
		// every reopen reads) is read in a few growing reads that the
		// kernel's own read-ahead follows: the hint would be a system
		// call of a short-lived process's open for nothing.
		vfs.WillNeed(f)
	}
	maxRec := r.MaxRecordSize
	if maxRec <= 0 {
		maxRec = DefaultMaxRecordSize
	}
	src := &fileSource{f: f, name: name, size: info.Size, buf: r.buf, window: int64(cmp.Or(r.window, scanWindow))}
	sc := &scanner{name: name, seg: seg, src: src, maxRec: maxRec, payload: r.payload}
	defer func() { r.buf, r.payload = src.buf[:0], sc.payload[:0] }()
	info, err = sc.scan(newest, info, fn)
	return info, sc.key, err
}

// source is a segment's bytes as scan reads them.
type source interface {
	// at returns the bytes from off to off+n, fewer where the segment
	// ends first; they stay valid until the next call.
	at(off int64, n int) ([]byte, error)
	// held is how many bytes from off at returns without a read.
	held(off int64) int
	len() int64
}

// scanWindow is how much of a segment a Reader reads at once: big enough
// that a read costs little next to its copy, small enough that a short-
// lived process scanning a segment of zeros after a checkpoint (1 MiB
// reserved) fills few fresh pages of its buffer, which on a virtual
// machine cost more than the read.
const scanWindow = 256 << 10

// firstWindow is a scan's first read; each read after it is twice the
// one before, up to the window. The newest segment of a store just
// reopened is mostly its reserved zeros, which a scan reads to the end:
// read in growing pieces into the front of one buffer, they fault in
// fewer of its pages, which a new process pays for more than for the
// reads. A page first: the 16 KiB a checkpoint's segment starts with are
// read as 4, 8 and 4 KiB into two pages, where one read of 16 KiB into
// four took a reopen 3 µs longer.
const firstWindow = 4 << 10

// fileSource reads a segment file a window at a time.
type fileSource struct {
	f      vfs.File
	name   string
	size   int64
	window int64
	next   int64  // the next read's size, growing to window; 0 before the first
	buf    []byte // the bytes from base on
	base   int64
}

func (s *fileSource) len() int64 { return s.size }

func (s *fileSource) held(off int64) int {
	if off < s.base || off >= s.base+int64(len(s.buf)) {
		return 0
	}
	return int(s.base + int64(len(s.buf)) - off)
}

func (s *fileSource) at(off int64, n int) ([]byte, error) {
	end := min(off+int64(n), s.size)
	if off >= s.base && end <= s.base+int64(len(s.buf)) {
		return s.buf[off-s.base : end-s.base], nil
	}
	if s.next == 0 {
		s.next = min(firstWindow, s.window)
	}
	w := min(max(end-off, s.next), s.size-off)
	s.next = min(2*s.next, s.window)
	if int64(cap(s.buf)) < w {
		// Room for the whole window at once, which later reads grow
		// into: only the pages a read fills are touched.
		s.buf = make([]byte, w, max(w, min(s.window, s.size)))
	}
	s.buf, s.base = s.buf[:w], off
	if k, err := s.f.ReadAt(s.buf, off); err != nil && !(err == io.EOF && int64(k) == w) {
		s.buf = s.buf[:0]
		return nil, fmt.Errorf("wal: read %s at offset %d: %w", s.name, off, err)
	}
	return s.buf[:end-off], nil
}

// scanner reads one segment.
type scanner struct {
	name    string
	seg     SegmentNum
	src     source
	maxRec  int
	key     *segKey
	payload []byte
}

// scan applies the rules of Scan to the segment src holds.
func (sc *scanner) scan(newest bool, info SegmentInfo, fn func(Record) error) (SegmentInfo, error) {
	size := sc.src.len()
	hb, err := sc.src.at(0, firstRecord)
	if err != nil {
		return info, err
	}
	k, reason, err := parseSegmentHeader(sc.name, sc.seg, hb)
	if err != nil {
		return info, err
	}
	if reason != "" {
		return sc.headerDamage(newest, info, reason)
	}
	sc.key = k
	off := int64(firstRecord)
	info.End, info.DataEnd = off, off
	for off < size {
		b, err := sc.src.at(off, HeaderSize)
		if err != nil {
			return info, err
		}
		if len(b) < HeaderSize {
			reason = "incomplete record header"
			break
		}
		var h header
		if h, reason = parseHeader(b, k); reason != "" {
			break
		}
		if h.length > sc.maxRec {
			// The header is this writer's: not damage, a record this
			// reader was told to refuse.
			return info, corruptf(sc.name, off, "record of %d bytes, over the maximum record size %d", h.length, sc.maxRec)
		}
		if h.synced > off {
			return info, corruptf(sc.name, off, "record claims %d bytes synced before its own offset", h.synced)
		}
		if b, err = sc.src.at(off, HeaderSize+h.length); err != nil {
			return info, err
		}
		if len(b) < HeaderSize+h.length {
			reason = "incomplete record"
			break
		}
		if reason = checkRecord(b, k); reason != "" {
			break
		}
		switch {
		case info.Sealed:
			return info, corruptf(sc.name, off, "%s record after the seal", h.typ)
		case h.typ == TypeSeal:
			if h.length != 0 {
				return info, corruptf(sc.name, off, "seal record with a payload")
			}
			info.Sealed = true
		case h.typ == TypeMark:
			if h.length != 0 {
				return info, corruptf(sc.name, off, "mark record with a payload")
			}
			info.Marks++
		default:
			info.Records++
			if fn != nil {
				if cap(sc.payload) < h.length || sc.payload == nil {
					sc.payload = make([]byte, max(h.length, 64))
				}
				p := sc.payload[:h.length]
				k.scramble(p, b[HeaderSize:])
				if err := fn(Record{Segment: sc.seg, Offset: off, Payload: p}); err != nil {
					return info, err
				}
			}
		}
		info.Synced = max(info.Synced, h.synced)
		off += int64(HeaderSize + h.length)
		info.End = off
		if h.typ != TypeMark {
			info.DataEnd = off
		}
	}
	zero, err := zerosFrom(sc.src, off)
	if err != nil {
		return info, err
	}
	if zero {
		// Rule 1: a clean end, or zeros: preallocated space, or writes
		// that a crash lost entirely. Only the newest segment may end
		// unsealed.
		if !newest && !info.Sealed {
			return info, corruptf(sc.name, off, "sealed segment ends without a seal record (cut short)")
		}
		return info, nil
	}
	if !newest || info.Sealed {
		if info.Sealed {
			reason = "bytes after the seal record"
		}
		return info, corruptf(sc.name, off, "%s", reason)
	}
	return sc.judge(off, reason, info)
}

// parseSegmentHeader checks the segment header record at the start of b
// (its first firstRecord bytes, or fewer when the file is shorter). It
// returns the segment's key; or a reason when the bytes are not a valid
// header record (damage, judged by the caller); or an error for a valid
// record that names another version or segment.
func parseSegmentHeader(name string, seg SegmentNum, b []byte) (*segKey, string, error) {
	if isV1Header(b) {
		return nil, "", versionError(name, 1)
	}
	if len(b) < firstRecord {
		return nil, "incomplete segment header", nil
	}
	if RecordType(b[0]) != TypeHeader || b[1]|b[2]|b[3] != 0 || binary.LittleEndian.Uint32(b[4:]) != segmentHeaderSize {
		return nil, "segment does not start with a header record", nil
	}
	p := b[HeaderSize:firstRecord]
	k := keyFor(binary.LittleEndian.Uint64(p[16:]))
	if k.headerCRC(b) != binary.LittleEndian.Uint32(b[16:]) || k.recordCRC(b[:firstRecord]) != binary.LittleEndian.Uint32(b[20:]) {
		return nil, "segment header checksum mismatch", nil
	}
	if !bytes.Equal(p[:4], segmentMagic[:]) {
		return nil, "", corruptf(name, 0, "bad segment header magic")
	}
	// The magic and version sit at the same offsets in every version.
	if v := binary.LittleEndian.Uint16(p[4:]); v != Version {
		return nil, "", versionError(name, v)
	}
	if binary.LittleEndian.Uint16(p[6:]) != 0 || binary.LittleEndian.Uint64(b[8:]) != 0 {
		return nil, "", corruptf(name, 0, "reserved segment header bytes not zero")
	}
	if s := SegmentNum(binary.LittleEndian.Uint64(p[8:])); s != seg {
		return nil, "", corruptf(name, 0, "segment header names segment %s", s)
	}
	return k, "", nil
}

func versionError(name string, v uint16) error {
	return &CorruptError{Err: ErrVersion, File: name, Offset: 0,
		Reason: fmt.Sprintf("segment format version %d, this build reads version %d", v, Version)}
}

// isV1Header reports whether b starts with a valid header record of
// format version 1, whose record header held the CRC first (of bytes
// [4, 40)), then the length (16), the type (1) at byte 8, and whose
// payload held the magic and the version at the offsets of today's.
func isV1Header(b []byte) bool {
	return len(b) >= 40 && b[8] == byte(TypeHeader) && binary.LittleEndian.Uint32(b[4:]) == 16 &&
		bytes.Equal(b[24:28], segmentMagic[:]) && binary.LittleEndian.Uint16(b[28:]) == 1 &&
		crc32.Checksum(b[4:40], castagnoli) == binary.LittleEndian.Uint32(b)
}

// headerPrefix reports whether b, shorter than a segment header record,
// matches one as far as it goes (the checksums and the salt unknown).
func headerPrefix(seg SegmentNum, b []byte) bool {
	var want [firstRecord]byte
	want[0] = byte(TypeHeader)
	binary.LittleEndian.PutUint32(want[4:], segmentHeaderSize)
	copy(want[HeaderSize:], segmentMagic[:])
	binary.LittleEndian.PutUint16(want[HeaderSize+4:], Version)
	binary.LittleEndian.PutUint64(want[HeaderSize+8:], uint64(seg))
	for i, c := range b {
		known := i < 16 || (i >= HeaderSize && i < HeaderSize+16)
		if known && c != want[i] {
			return false
		}
	}
	return true
}

// headerDamage judges a segment whose header record is not valid, as the
// paragraph before the numbered rules of FORMAT.md's "Torn tail or
// corruption" says. The header is made durable before any other record is
// written (Create syncs it), so a crash leaves it whole, missing (zeros,
// or an empty file), or, in a file shorter than a header record, cut
// short; anything else is not a segment of this store's, or is damaged.
func (sc *scanner) headerDamage(newest bool, info SegmentInfo, reason string) (SegmentInfo, error) {
	zero, err := zerosFrom(sc.src, 0)
	if err != nil {
		return info, err
	}
	if !newest {
		return info, corruptf(sc.name, 0, "%s", reason)
	}
	if zero {
		return info, nil
	}
	if size := sc.src.len(); size < firstRecord {
		b, err := sc.src.at(0, int(size))
		if err != nil {
			return info, err
		}
		if headerPrefix(sc.seg, b) {
			info.Torn, info.TornReason = true, reason
			return info, nil
		}
	}
	return info, corruptf(sc.name, 0, "%s: not a segment header this store wrote (a crash leaves a segment header whole, zeroed or cut short)", reason)
}

// zerosFrom reports whether the segment holds only zeros from off on.
func zerosFrom(src source, off int64) (bool, error) {
	// What the source holds first, then in growing pieces, as a
	// fileSource reads (firstWindow): asking for a window from off where
	// the source holds part of one read the part again (a reopen read
	// 96 KiB of a 64 KiB segment).
	for n := firstWindow; off < src.len(); n = min(2*n, scanWindow) {
		k := src.held(off)
		if k == 0 {
			k = n
		}
		b, err := src.at(off, k)
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

// SectorSize is the unit in which a crash can lose a write: crash damage
// in the newest segment must include a sector that reads as zeros (see
// judge). Part of the on-disk format's rules.
const SectorSize = 512

// judge decides whether the damage at off, at the end of the newest
// segment, is crash damage (info.Torn) or corruption. The rules are
// FORMAT.md's "Torn tail or corruption", 2 to 4 (scan applies rule 1
// before it calls judge); each branch names its rule. It reads the rest
// of the segment once, a window at a time.
func (sc *scanner) judge(off int64, reason string, info SegmentInfo) (SegmentInfo, error) {
	size := sc.src.len()
	// Rule 2: a later record whose header this segment's writer wrote,
	// claiming that bytes past off were synced, proves them durable; no
	// crash damages durable bytes. The claim is in the header, which its
	// own checksum protects, so the rest of that record need not be
	// whole. Headers are checked at every offset, a few bytes each.
	next := int64(-1) // the first such header after off
	const step = 1 << 20
	for base := off + 1; base+HeaderSize <= size; base += step {
		b, err := sc.src.at(base, step+HeaderSize-1)
		if err != nil {
			return info, err
		}
		for i := 0; i+HeaderSize <= len(b) && i < step; i++ {
			if b[i] < byte(TypeData) || b[i] > byte(maxType) || b[i+1]|b[i+2]|b[i+3] != 0 {
				continue
			}
			h, bad := parseHeader(b[i:], sc.key)
			if bad != "" {
				continue
			}
			p := base + int64(i)
			if h.synced > off {
				return info, corruptf(sc.name, off,
					"%s, but the record at offset %d was written when the segment was synced up to offset %d, past the damage (rule 2)", reason, p, h.synced)
			}
			if next < 0 {
				next = p
			}
		}
	}

	// Rule 3: the damaged record itself must look like what a crash
	// leaves (3a, 3b or 3c), or it is corruption.
	b, err := sc.src.at(off, HeaderSize)
	if err != nil {
		return info, err
	}
	if len(b) < HeaderSize {
		// 3a: the file ends inside a record header.
		if plausible(b) {
			return sc.torn(info, reason)
		}
		return info, corruptf(sc.name, off, "%s, and the %d bytes left are not the start of a record (rule 3a)", reason, len(b))
	}
	end := off + HeaderSize // the span a crash must have zeroed part of
	if h, bad := parseHeader(b, sc.key); bad == "" {
		if off+int64(HeaderSize+h.length) > size {
			// 3b: the header is intact and the file ends before the
			// record does: the write was cut short.
			return sc.torn(info, reason)
		}
		end = off + int64(HeaderSize+h.length)
	}
	if next >= 0 {
		end = min(end, next)
	}
	// 3c: a crash loses whole sectors and never alters a byte it keeps:
	// some sector that holds part of the damaged span must read as zeros,
	// from the span's start or the sector's, to the sector's end or the
	// end of the file. Data payloads are stored scrambled, so a value's
	// zeros never read as zeros on disk.
	for s := off / SectorSize * SectorSize; s < end; s += SectorSize {
		from := max(s, off)
		z, err := sc.src.at(from, int(s+SectorSize-from))
		if err != nil {
			return info, err
		}
		if allZero(z) {
			return sc.torn(info, reason)
		}
	}
	// Rule 3, none of 3a to 3c: corruption.
	return info, corruptf(sc.name, off,
		"%s, and no sector of bytes %d to %d reads as zeros: a crash loses writes, it does not alter them (rule 3)", reason, off, end)
}

// torn is rule 4: crash damage is a torn tail at the offset judged. The
// records before it are the segment's contents (info as scanned so far),
// and a writer cuts the file there before it writes anything after it.
func (sc *scanner) torn(info SegmentInfo, reason string) (SegmentInfo, error) {
	info.Torn, info.TornReason = true, reason
	return info, nil
}
