package wal_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
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

// goldenSalt is the golden segment's salt; a real segment's is random.
const goldenSalt = 0x0123456789abcdef

// writeGolden writes the golden segment with the Writer on an in-memory
// file system: the header, one record, a sync, two records in one Append,
// and the seal that Rotate writes.
func writeGolden(tb testing.TB) []byte {
	tb.Helper()
	fsys := newFS(tb)
	w, err := wal.Create(fsys, testDir, 1, wal.WithSalt(wal.Options{}, goldenSalt))
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
	// Offsets by hand: header record 24+24 = 48 bytes, then 24 bytes of
	// header per record plus its payload. Create synced the header, so
	// the first data record claims its 48 bytes durable; the next two
	// were written after the sync of the first 83 bytes, and so was the
	// seal.
	want := []field{
		{Offset: 0, Type: 1, Synced: 0, Payload: "KVWL\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xef\xcd\xab\x89\x67\x45\x23\x01"},
		{Offset: 48, Type: 2, Synced: 48, Payload: "put alpha=1"},
		{Offset: 83, Type: 2, Synced: 83, Payload: "put beta=22"},
		{Offset: 118, Type: 2, Synced: 83, Payload: "del alpha"},
		// Rotate syncs the records before it creates the next segment,
		// and the seal says so.
		{Offset: 151, Type: 3, Synced: 151, Payload: ""},
	}
	var got []field
	off := 0
	for off < len(b) {
		if len(b)-off < 24 {
			t.Fatalf("offset %d: %d bytes left, less than a record header", off, len(b)-off)
		}
		h := b[off : off+24]
		typ := h[0]
		reserved := h[1:4]
		length := int(binary.LittleEndian.Uint32(h[4:8]))
		synced := binary.LittleEndian.Uint64(h[8:16])
		hcrc := binary.LittleEndian.Uint32(h[16:20])
		crc := binary.LittleEndian.Uint32(h[20:24])
		if off+24+length > len(b) {
			t.Fatalf("offset %d: length %d past the end of the file", off, length)
		}
		stored := b[off+24 : off+24+length]
		if !bytes.Equal(reserved, []byte{0, 0, 0}) {
			t.Errorf("offset %d: reserved bytes % x, want zeros", off, reserved)
		}
		if sum := saltedCRC(goldenSalt, h[0:16]); sum != hcrc {
			t.Errorf("offset %d: header CRC field %#08x, CRC-32C of the salt and bytes [0, 16) is %#08x", off, hcrc, sum)
		}
		if sum := saltedCRC(goldenSalt, h[0:20], stored); sum != crc {
			t.Errorf("offset %d: record CRC field %#08x, CRC-32C of the salt, bytes [0, 20) and the payload is %#08x", off, crc, sum)
		}
		payload := stored
		switch typ {
		case 1:
			// The segment header payload: magic, version, zero, segment,
			// salt; stored as is.
			if length != 24 {
				t.Fatalf("offset %d: header payload of %d bytes, want 24", off, length)
			}
			if m := string(payload[0:4]); m != "KVWL" {
				t.Errorf("magic %q, want KVWL", m)
			}
			if v := binary.LittleEndian.Uint16(payload[4:6]); v != 2 {
				t.Errorf("version %d, want 2", v)
			}
			if z := binary.LittleEndian.Uint16(payload[6:8]); z != 0 {
				t.Errorf("reserved uint16 %d, want 0", z)
			}
			if s := binary.LittleEndian.Uint64(payload[8:16]); s != 1 {
				t.Errorf("header names segment %d, want 1", s)
			}
			if s := binary.LittleEndian.Uint64(payload[16:24]); s != goldenSalt {
				t.Errorf("salt %#x, want %#x", s, uint64(goldenSalt))
			}
		case 2:
			// A data payload is stored scrambled: none of it may show.
			if bytes.Contains(b, []byte("alpha")) {
				t.Errorf("the segment holds a payload's bytes in the clear")
			}
			payload = scramble(goldenSalt, stored)
		}
		got = append(got, field{Offset: off, Type: typ, Synced: synced, Payload: string(payload)})
		off += 24 + length
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records of %s (-want +got):\n%s", goldenSegment, diff)
	}
	if len(b) != 175 {
		t.Errorf("%s has %d bytes, want 175", goldenSegment, len(b))
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
	if !info.Sealed || info.End != 175 || info.Synced != 151 {
		t.Errorf("Scan of %s: %+v, want sealed with End 175 and Synced 151", goldenSegment, info)
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
	want = append(want, frame(typeHeader, goldenSalt, 0, headerPayload("KVWL", 2, 1, goldenSalt))...)
	want = append(want, frame(typeData, goldenSalt, 48, goldenPayloads[0])...)
	want = append(want, frame(typeData, goldenSalt, 83, goldenPayloads[1])...)
	want = append(want, frame(typeData, goldenSalt, 83, goldenPayloads[2])...)
	want = append(want, frame(typeSeal, goldenSalt, 151, nil)...)
	if !bytes.Equal(want, b) {
		t.Errorf("frame disagrees with %s (-want +got):\n%s", goldenSegment, cmp.Diff(hex.Dump(want), hex.Dump(b)))
	}
}
