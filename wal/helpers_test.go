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
	segHeaderRec  = recHeaderSize + 24 // the header record of every segment
	typeHeader    = 1
	typeData      = 2
	typeSeal      = 3
	typeMark      = 4
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

// recordsFrom returns what Scan must return for payloads written one
// record after another from offset off.
func recordsFrom(seg wal.SegmentNum, off int64, ps [][]byte) []scanned {
	var want []scanned
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

// frame builds one record by hand from the spec: type, three zero bytes,
// length, synced offset, header CRC (CRC-32C of the salt's 8 bytes, then
// bytes [0, 16)), record CRC (of the salt, bytes [0, 20) and the stored
// payload), then the payload, scrambled for a data record; all
// little-endian. salt is the segment's.
func frame(typ byte, salt uint64, synced uint64, payload []byte) []byte {
	b := make([]byte, recHeaderSize, recHeaderSize+len(payload))
	b[0] = typ
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(b[8:], synced)
	if typ == typeData {
		b = append(b, scramble(salt, payload)...)
	} else {
		b = append(b, payload...)
	}
	recrc(b, 0, salt)
	return b
}

// scramble returns p XOR the key of salt, repeated: SplitMix64 seeded with
// the salt, 8 bytes little-endian per step, 4096 bytes.
func scramble(salt uint64, p []byte) []byte {
	key := make([]byte, 4096)
	x := salt
	for i := 0; i < len(key); i += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(key[i:], z^(z>>31))
	}
	out := make([]byte, len(p))
	for i := range p {
		out[i] = p[i] ^ key[i%len(key)]
	}
	return out
}

// headerPayload builds the payload of a segment header record by hand.
func headerPayload(magic string, version uint16, seg, salt uint64) []byte {
	p := make([]byte, 24)
	copy(p, magic)
	binary.LittleEndian.PutUint16(p[4:], version)
	binary.LittleEndian.PutUint64(p[8:], seg)
	binary.LittleEndian.PutUint64(p[16:], salt)
	return p
}

// saltOf returns the salt in the header record of segment bytes b.
func saltOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b[recHeaderSize+16:]) }

// saltedCRC is CRC-32C of the salt's 8 bytes followed by the parts.
func saltedCRC(salt uint64, parts ...[]byte) uint32 {
	var sb [8]byte
	binary.LittleEndian.PutUint64(sb[:], salt)
	c := crc32.Update(0, castagnoli, sb[:])
	for _, p := range parts {
		c = crc32.Update(c, castagnoli, p)
	}
	return c
}

// recrc recomputes both checksums of the record at off in b, after a test
// changed a field on purpose and wants the record to pass them.
func recrc(b []byte, off int64, salt uint64) {
	n := int64(binary.LittleEndian.Uint32(b[off+4:]))
	binary.LittleEndian.PutUint32(b[off+16:], saltedCRC(salt, b[off:off+16]))
	binary.LittleEndian.PutUint32(b[off+20:], saltedCRC(salt, b[off:off+20], b[off+recHeaderSize:off+recHeaderSize+n]))
}

// recrcHeader recomputes the checksums of the segment header record of b
// with the salt its payload holds.
func recrcHeader(b []byte) { recrc(b, 0, saltOf(b)) }

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

// v1Header builds the header record of a version 1 segment by hand: the
// 24-byte header of that version (CRC-32C of bytes [4, 40), length 16,
// type 1, three zeros, the segment number's low 32 bits, synced offset 0)
// and its payload (magic, version 1, zero, segment).
func v1Header(seg uint64) []byte {
	b := make([]byte, 40)
	binary.LittleEndian.PutUint32(b[4:], 16)
	b[8] = 1
	binary.LittleEndian.PutUint32(b[12:], uint32(seg))
	copy(b[24:], "KVWL")
	binary.LittleEndian.PutUint16(b[28:], 1)
	binary.LittleEndian.PutUint64(b[32:], seg)
	binary.LittleEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}
