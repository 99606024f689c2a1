package wal

import (
	"bytes"
	"cmp"
)

// Span is a byte range [From, To) of a file.
type Span struct{ From, To int64 }

// Salvaged says what Salvage read of a segment file.
type Salvaged struct {
	Size    int64
	Records int // data records read
	// Header reports that the segment header was readable: without it no
	// record can be checked, and the whole file is in Damaged (unless it
	// is all zeros).
	Header bool
	// Damaged lists the ranges that hold neither a valid record nor zeros
	// only, in order.
	Damaged []Span
}

// DamagedBytes is the total length of the damaged ranges.
func (s *Salvaged) DamagedBytes() int64 {
	n := int64(0)
	for _, d := range s.Damaged {
		n += d.To - d.From
	}
	return n
}

// Salvage reads every valid data record of the segment file name (a
// segment, or a copy of one kept as evidence) that belongs to segment seg,
// whatever damage lies around it, and calls fn with each in order. It
// never fails on damage: it reports the ranges it could not read. It takes
// time linear in the file's size: a run of headers that check out but
// whose records do not is given up after the file's size in bytes has been
// checksummed in vain, and reported as damaged.
func (r *Reader) Salvage(name string, seg SegmentNum, fn func(Record) error) (Salvaged, error) {
	out := Salvaged{}
	f, err := r.FS.Open(name)
	if err != nil {
		return out, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return out, err
	}
	out.Size = fi.Size()
	maxRec := cmp.Or(r.MaxRecordSize, DefaultMaxRecordSize)
	src := &fileSource{f: f, name: name, size: out.Size, buf: r.buf, window: int64(cmp.Or(r.window, scanWindow))}
	defer func() { r.buf = src.buf[:0] }()
	size := out.Size
	hb, err := src.at(0, firstRecord)
	if err != nil {
		return out, err
	}
	k, reason, _ := parseSegmentHeader(name, seg, hb)
	if k == nil || reason != "" {
		if z, err := zerosFrom(src, 0); err != nil || !z {
			out.Damaged = append(out.Damaged, Span{0, size})
			return out, err
		}
		return out, nil
	}
	out.Header = true
	budget := size // bytes to checksum in vain before giving up
	// record returns the length of the valid record at off, or 0.
	record := func(off int64) (int, *header, error) {
		b, err := src.at(off, HeaderSize)
		if err != nil || len(b) < HeaderSize || !plausible(b[:4]) {
			return 0, nil, err
		}
		h, bad := parseHeader(b, k)
		if bad != "" || h.length > maxRec || h.synced > off {
			return 0, nil, nil
		}
		if b, err = src.at(off, HeaderSize+h.length); err != nil || len(b) < HeaderSize+h.length {
			return 0, nil, err
		}
		if checkRecord(b, k) != "" {
			budget -= int64(len(b))
			return 0, nil, nil
		}
		return HeaderSize + h.length, &h, nil
	}
	off := int64(firstRecord)
	for off < size {
		n, h, err := record(off)
		if err != nil {
			return out, err
		}
		if n > 0 {
			if h.typ == TypeData {
				out.Records++
				if fn != nil {
					b, err := src.at(off, n)
					if err != nil {
						return out, err
					}
					p := make([]byte, h.length)
					k.scramble(p, b[HeaderSize:])
					if err := fn(Record{Segment: seg, Offset: off, Payload: p}); err != nil {
						return out, err
					}
				}
			}
			off += int64(n)
			continue
		}
		// Damage, or zeros: find the next valid record.
		next := size
		for p := off + 1; p+HeaderSize <= size && budget > 0; p++ {
			b, err := src.at(p, HeaderSize)
			if err != nil {
				return out, err
			}
			if b[0] < byte(TypeData) || b[0] > byte(maxType) || b[1]|b[2]|b[3] != 0 {
				continue
			}
			if n, _, err := record(p); err != nil {
				return out, err
			} else if n > 0 {
				next = p
				break
			}
		}
		if budget <= 0 {
			next = size // given up: the rest is damage
		}
		// Zeros that end the range are space the log reserved, or writes
		// a crash lost: no record was there.
		end, err := lastNonZero(src, off, next)
		if err != nil {
			return out, err
		}
		if end > off {
			out.Damaged = append(out.Damaged, Span{off, end})
		}
		off = next
	}
	return out, nil
}

// lastNonZero returns the end of the last byte in [from, to) that is not
// zero, or from when they all are.
func lastNonZero(src source, from, to int64) (int64, error) {
	end := from
	for off := from; off < to; {
		b, err := src.at(off, int(min(to-off, scanWindow)))
		if err != nil {
			return 0, err
		}
		if i := bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
			end = off + int64(i) + 1
		}
		off += int64(len(b))
	}
	return end, nil
}
