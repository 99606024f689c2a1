package wal

import (
	"encoding/binary"
	"io"

	"github.com/kvstore/kv/vfs"
)

// Sniffed says what the first bytes of a file under a segment's name are.
type Sniffed int

// What Sniff finds.
const (
	// SniffForeign: the file does not start as any segment does, and is
	// not what a crash leaves of one being created: not the store's.
	SniffForeign Sniffed = iota
	// SniffUnwritten: the file is empty, holds only zeros, or is shorter
	// than a segment header record and matches one as far as it goes:
	// what a crash leaves of a segment being created. No record was ever
	// in it.
	SniffUnwritten
	// SniffSegment: the file starts with the frame of a segment header
	// record (type 1, zero reserved bytes, the header's length), of this
	// format version or of version 1. Its checksums are not checked: a
	// segment whose header is damaged is still a segment, and damaged.
	SniffSegment
)

// Sniff looks at the start of the file name, under the name of segment seg,
// to tell whether a directory that does not say it is a store was written
// by one (see FORMAT.md, "The data directory"). It reads at most the
// segment header record, and the whole file only when it is all zeros so
// far. It never changes the file.
func Sniff(fsys vfs.FS, name string, seg SegmentNum) (Sniffed, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return SniffForeign, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return SniffForeign, err
	}
	size := fi.Size()
	b := make([]byte, min(size, 40))
	if n, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && n == len(b)) {
		return SniffForeign, err
	}
	switch {
	case size < firstRecord && headerPrefix(seg, b):
		return SniffUnwritten, nil
	case isV1Header(b):
		return SniffSegment, nil
	case len(b) >= 8 && RecordType(b[0]) == TypeHeader && b[1]|b[2]|b[3] == 0 &&
		binary.LittleEndian.Uint32(b[4:]) == segmentHeaderSize:
		return SniffSegment, nil
	}
	src := &fileSource{f: f, name: name, size: size, window: scanWindow}
	if z, err := zerosFrom(src, 0); err != nil || !z {
		return SniffForeign, err
	}
	return SniffUnwritten, nil
}
