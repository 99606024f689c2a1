package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// testDir is the directory the tests keep their segments in.
const testDir = "db"

// Layout constants, written down here from the format spec rather than
// taken from the package, so that the tests notice a drift.
const (
	recHeaderSize = 24
	segHeaderRec  = recHeaderSize + 16 // the header record of every segment
	typeHeader    = 1
	typeData      = 2
	typeSeal      = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newFS returns an in-memory file system holding an empty testDir.
func newFS(tb testing.TB) *vfs.MemFS {
	tb.Helper()
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll(testDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return fsys
}

// scanned is a data record as Scan returned it, its payload copied.
type scanned struct {
	Segment wal.SegmentNum
	Offset  int64
	Payload []byte
}

// scanSegment scans segment seg of testDir in fsys and returns copies of the
// data records Scan delivered before it returned.
func scanSegment(fsys vfs.FS, seg wal.SegmentNum, newest bool) ([]scanned, wal.SegmentInfo, error) {
	r := &wal.Reader{FS: fsys, Dir: testDir}
	var got []scanned
	info, err := r.Scan(seg, newest, func(rec wal.Record) error {
		got = append(got, scanned{Segment: rec.Segment, Offset: rec.Offset, Payload: bytes.Clone(rec.Payload)})
		return nil
	})
	return got, info, err
}

// readSegment returns the bytes of segment seg of testDir.
func readSegment(tb testing.TB, fsys vfs.FS, seg wal.SegmentNum) []byte {
	tb.Helper()
	b, err := vfs.ReadFile(fsys, wal.SegmentPath(testDir, seg))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// memWithSegment returns a fresh in-memory file system whose testDir holds
// segment seg with contents b.
func memWithSegment(tb testing.TB, seg wal.SegmentNum, b []byte) *vfs.MemFS {
	tb.Helper()
	fsys := newFS(tb)
	f, err := fsys.Create(wal.SegmentPath(testDir, seg))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return fsys
}

// payloads returns n payloads of varied sizes (0 to a few hundred bytes)
// whose bytes are not zero, so that a cut inside one leaves non-zero bytes.
func payloads(n int) [][]byte {
	sizes := []int{7, 130, 1, 300, 42, 0, 255, 16, 64, 200, 3, 99}
	var ps [][]byte
	for i := range n {
		p := make([]byte, sizes[i%len(sizes)])
		for j := range p {
			p[j] = byte('a' + (i+j)%26)
		}
		ps = append(ps, p)
	}
	return ps
}

// recordsFor returns what Scan must return for payloads written one record
// after another from the end of the segment header record.
func recordsFor(seg wal.SegmentNum, ps [][]byte) []scanned {
	var want []scanned
	off := int64(segHeaderRec)
	for _, p := range ps {
		want = append(want, scanned{Segment: seg, Offset: off, Payload: p})
		off += recHeaderSize + int64(len(p))
	}
	return want
}

// writeSynced writes segment seg with the real Writer: one Append and one
// Sync per payload, so that every record but the first claims the records
// before it durable. With seal set it then calls Rotate, which seals seg
// (and creates seg+1). It returns the offsets of the data records.
func writeSynced(tb testing.TB, fsys vfs.FS, seg wal.SegmentNum, ps [][]byte, opts wal.Options, seal bool) []int64 {
	tb.Helper()
	w, err := wal.Create(fsys, testDir, seg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	var offs []int64
	for _, p := range ps {
		pos, err := w.Append(p)
		if err != nil {
			tb.Fatal(err)
		}
		offs = append(offs, pos.Offset)
		if err := w.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	if seal {
		if _, err := w.Rotate(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return offs
}

// frame builds one record by hand from the spec: CRC-32C of bytes
// [4, 24+len), length, type, three zero bytes, segment, synced offset,
// payload; all little-endian.
func frame(typ byte, seg uint32, synced uint64, payload []byte) []byte {
	b := make([]byte, recHeaderSize, recHeaderSize+len(payload))
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	b[8] = typ
	binary.LittleEndian.PutUint32(b[12:], seg)
	binary.LittleEndian.PutUint64(b[16:], synced)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}

// headerPayload builds the payload of a segment header record by hand.
func headerPayload(magic string, version uint16, seg uint64) []byte {
	p := make([]byte, 16)
	copy(p, magic)
	binary.LittleEndian.PutUint16(p[4:], version)
	binary.LittleEndian.PutUint64(p[8:], seg)
	return p
}

// recrc recomputes the CRC of the record at off in b, after a test changed
// a field on purpose and wants the record to pass its checksum.
func recrc(b []byte, off int64) {
	n := int64(binary.LittleEndian.Uint32(b[off+4:]))
	binary.LittleEndian.PutUint32(b[off:], crc32.Checksum(b[off+4:off+recHeaderSize+n], castagnoli))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkCorrupt reports what is wrong with err when it should be a
// *wal.CorruptError matching sentinel for file at offset off.
func checkCorrupt(err, sentinel error, file string, off int64) error {
	if !errors.Is(err, sentinel) {
		return fmt.Errorf("error %v, want one matching %v", err, sentinel)
	}
	var ce *wal.CorruptError
	if !errors.As(err, &ce) {
		return fmt.Errorf("error %v (%T) is not a *wal.CorruptError", err, err)
	}
	if ce.File != file || ce.Offset != off {
		return fmt.Errorf("error names %s at offset %d, want %s at offset %d (%v)", ce.File, ce.Offset, file, off, err)
	}
	if ce.Reason == "" {
		return fmt.Errorf("error %v gives no reason", err)
	}
	return nil
}
