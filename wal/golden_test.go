package wal_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/wal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const goldenSegment = "testdata/segment.golden"

// goldenPayloads are the data records of the golden segment.
var goldenPayloads = [][]byte{[]byte("put alpha=1"), []byte("put beta=22"), []byte("del alpha")}

// writeGolden writes the golden segment with the Writer on an in-memory
// file system: the header, one record, a sync, two records in one Append,
// and the seal that Rotate writes.
func writeGolden(tb testing.TB) []byte {
	tb.Helper()
	fsys := newFS(tb)
	w, err := wal.Create(fsys, testDir, 1, wal.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Append(goldenPayloads[0]); err != nil {
		tb.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Append(goldenPayloads[1:]...); err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Rotate(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return readSegment(tb, fsys, 1)
}

func TestGoldenSegment(t *testing.T) {
	got := writeGolden(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenSegment), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenSegment, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenSegment)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("the Writer's bytes differ from %s; if the format change is intended, bump the version and run with -update (-want +got):\n%s",
			goldenSegment, cmp.Diff(hex.Dump(want), hex.Dump(got)))
	}
}

// TestGoldenSegmentLayout decodes the golden segment by hand, field by
// field, from the format spec, without the package's parser: a change to
// the format shows here even if the writer and the reader drift together.
func TestGoldenSegmentLayout(t *testing.T) {
	b, err := os.ReadFile(goldenSegment)
	if err != nil {
		t.Fatal(err)
	}
	type field struct {
		Offset  int
		Type    byte
		Synced  uint64
		Payload string
	}
	// Offsets by hand: header record 24+16 = 40 bytes, then 24 bytes of
	// header per record plus its payload. The first data record was
	// written before any sync (synced 0); the next two after the sync of
	// the first 75 bytes, and so was the seal.
	want := []field{
		{Offset: 0, Type: 1, Synced: 0, Payload: "KVWL\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"},
		{Offset: 40, Type: 2, Synced: 0, Payload: "put alpha=1"},
		{Offset: 75, Type: 2, Synced: 75, Payload: "put beta=22"},
		{Offset: 110, Type: 2, Synced: 75, Payload: "del alpha"},
		{Offset: 143, Type: 3, Synced: 75, Payload: ""},
	}
	var got []field
	off := 0
	for off < len(b) {
		if len(b)-off < 24 {
			t.Fatalf("offset %d: %d bytes left, less than a record header", off, len(b)-off)
		}
		h := b[off : off+24]
		crc := binary.LittleEndian.Uint32(h[0:4])
		length := int(binary.LittleEndian.Uint32(h[4:8]))
		typ := h[8]
		reserved := h[9:12]
		seg := binary.LittleEndian.Uint32(h[12:16])
		synced := binary.LittleEndian.Uint64(h[16:24])
		if off+24+length > len(b) {
			t.Fatalf("offset %d: length %d past the end of the file", off, length)
		}
		payload := b[off+24 : off+24+length]
		if sum := crc32.Checksum(b[off+4:off+24+length], crc32.MakeTable(crc32.Castagnoli)); sum != crc {
			t.Errorf("offset %d: CRC field %#08x, CRC-32C of bytes [4, 24+len) is %#08x", off, crc, sum)
		}
		if !bytes.Equal(reserved, []byte{0, 0, 0}) {
			t.Errorf("offset %d: reserved bytes % x, want zeros", off, reserved)
		}
		if seg != 1 {
			t.Errorf("offset %d: segment %d, want 1", off, seg)
		}
		if typ == 1 {
			// The segment header payload: magic, version, zero, segment.
			if length != 16 {
				t.Fatalf("offset %d: header payload of %d bytes, want 16", off, length)
			}
			if m := string(payload[0:4]); m != "KVWL" {
				t.Errorf("magic %q, want KVWL", m)
			}
			if v := binary.LittleEndian.Uint16(payload[4:6]); v != 1 {
				t.Errorf("version %d, want 1", v)
			}
			if z := binary.LittleEndian.Uint16(payload[6:8]); z != 0 {
				t.Errorf("reserved uint16 %d, want 0", z)
			}
			if s := binary.LittleEndian.Uint64(payload[8:16]); s != 1 {
				t.Errorf("header names segment %d, want 1", s)
			}
		}
		got = append(got, field{Offset: off, Type: typ, Synced: synced, Payload: string(payload)})
		off += 24 + length
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records of %s (-want +got):\n%s", goldenSegment, diff)
	}
	if len(b) != 167 {
		t.Errorf("%s has %d bytes, want 167", goldenSegment, len(b))
	}

	// The package reads it the same way.
	fsys := memWithSegment(t, 1, b)
	recs, info, err := scanSegment(fsys, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recordsFor(1, goldenPayloads), recs); diff != "" {
		t.Errorf("Scan of %s (-want +got):\n%s", goldenSegment, diff)
	}
	if !info.Sealed || info.End != 167 {
		t.Errorf("Scan of %s: %+v, want sealed with End 167", goldenSegment, info)
	}
}

// TestFrameMatchesWriter checks the tests' own hand-built framing against
// the golden file, so that corruption cases built with frame are realistic.
func TestFrameMatchesWriter(t *testing.T) {
	b, err := os.ReadFile(goldenSegment)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = append(want, frame(typeHeader, 1, 0, headerPayload("KVWL", 1, 1))...)
	want = append(want, frame(typeData, 1, 0, goldenPayloads[0])...)
	want = append(want, frame(typeData, 1, 75, goldenPayloads[1])...)
	want = append(want, frame(typeData, 1, 75, goldenPayloads[2])...)
	want = append(want, frame(typeSeal, 1, 75, nil)...)
	if !bytes.Equal(want, b) {
		t.Errorf("frame disagrees with %s (-want +got):\n%s", goldenSegment, cmp.Diff(hex.Dump(want), hex.Dump(b)))
	}
}
