package wal

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kvstore/kv/vfs"
)

// SegmentNum numbers a segment file. Segments are numbered from 1 without
// gaps; 0 means "no segment" (a snapshot covering 0 covers nothing).
type SegmentNum uint64

// String formats n as in file names: at least six digits.
func (n SegmentNum) String() string {
	// Zero-padded to six digits by hand: every open names segments, and
	// fmt's printer was the only use of it there.
	var b [20]byte
	d := strconv.AppendUint(b[:0], uint64(n), 10)
	if pad := 6 - len(d); pad > 0 {
		d = append([]byte("000000")[:pad], d...)
	}
	return string(d)
}

// segmentPrefix is part of the on-disk format.
const segmentPrefix = "log."

// SegmentName returns the base file name of segment n, such as log.000001.
func SegmentName(n SegmentNum) string { return segmentPrefix + n.String() }

// SegmentPath returns dir joined with SegmentName(n).
func SegmentPath(dir string, n SegmentNum) string { return path.Join(dir, SegmentName(n)) }

// ParseSegmentName reports the number of a segment file name. It accepts
// exactly "log." followed by six or more decimal digits with no sign, and a
// number of at least 1.
func ParseSegmentName(name string) (SegmentNum, bool) {
	digits, ok := strings.CutPrefix(name, segmentPrefix)
	if !ok || len(digits) < 6 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 || n > maxSegment {
		return 0, false
	}
	// Reject non-canonical spellings such as log.0000001, which would
	// alias log.000001.
	if SegmentName(SegmentNum(n)) != name {
		return 0, false
	}
	return SegmentNum(n), true
}

// maxSegment bounds segment numbers to what a record header stores.
const maxSegment = 1<<32 - 1

// ListSegments returns the numbers of the segment files in dir, ascending.
// Other files are ignored.
func ListSegments(fsys vfs.FS, dir string) ([]SegmentNum, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	return SegmentsIn(names), nil
}

// SegmentsIn returns the segments that names (a directory's listing)
// hold, in ascending order.
func SegmentsIn(names []string) []SegmentNum {
	var segs []SegmentNum
	for _, name := range names {
		if n, ok := ParseSegmentName(name); ok {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs
}

// CheckContiguous returns a *CorruptError when segs (ascending) does not
// start at first or has a gap. A missing segment is damage that a crash
// cannot cause: segments are created in order, each made durable by a
// directory sync before the next exists, and deleted only when covered.
func CheckContiguous(dir string, segs []SegmentNum, first SegmentNum) error {
	want := first
	for _, s := range segs {
		if s != want {
			return &CorruptError{Err: ErrCorrupt, File: SegmentPath(dir, want), Offset: -1,
				Reason: fmt.Sprintf("segment missing: expected %s before %s", SegmentName(want), SegmentName(s))}
		}
		want++
	}
	return nil
}
