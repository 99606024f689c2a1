package kvraft

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// handBuilt is the entry of testdata/log-v1.bin, its bytes written field
// by field from README.md ("Encoding"), not by AppendLog.
var handBuilt = struct {
	log   raft.Log
	bytes []byte
}{
	log: raft.Log{
		Index: 0x0102030405060708, Term: 7, Type: raft.LogCommand,
		Data: []byte("set x=1"), Extensions: []byte{0xee},
		AppendedAt: time.Unix(1767225600, 500), // 2026-01-01T00:00:00.0000005Z
	},
	bytes: []byte{
		0x01,                   // version
		0x00,                   // type: LogCommand
		0x01,                   // flags: AppendedAt stored
		7, 0, 0, 0, 0, 0, 0, 0, // term, little-endian
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // index, little-endian
		0x00, 0xb9, 0x55, 0x69, 0x00, 0x00, 0x00, 0x00, // AppendedAt seconds (1767225600 = 0x6955b900)
		0xf4, 0x01, 0x00, 0x00, // AppendedAt nanoseconds (500)
		0x07, 's', 'e', 't', ' ', 'x', '=', '1', // Data: uvarint length, bytes
		0x01, 0xee, // Extensions: uvarint length, bytes
	},
}

func TestEncodingGolden(t *testing.T) {
	got := AppendLog(nil, &handBuilt.log)
	if diff := cmp.Diff(handBuilt.bytes, got); diff != "" {
		t.Errorf("AppendLog (-hand-built +got):\n%s", diff)
	}
	if n := EncodedSize(&handBuilt.log); n != len(got) {
		t.Errorf("EncodedSize = %d, encoding is %d bytes", n, len(got))
	}
	golden := filepath.Join("testdata", "log-v1.bin")
	if *update {
		if err := os.WriteFile(golden, handBuilt.bytes, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := DecodeLog(file, &l); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(handBuilt.log, l); diff != "" {
		t.Errorf("DecodeLog(%s) (-want +got):\n%s", golden, diff)
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  raft.Log
	}{
		{"zero", raft.Log{}},
		{"max fields", raft.Log{Index: 1<<64 - 1, Term: 1<<64 - 1, Type: 255}},
		{"no AppendedAt", raft.Log{Index: 3, Term: 1, Type: raft.LogBarrier, Data: []byte("x")}},
		{"before 1970", raft.Log{Index: 1, AppendedAt: time.Date(1900, 1, 1, 0, 0, 0, 999999999, time.UTC)}},
		{"long data", raft.Log{Index: 1, Data: bytes.Repeat([]byte("d"), 300), Extensions: bytes.Repeat([]byte("e"), 20000)}},
		{"extensions only", raft.Log{Index: 1, Extensions: []byte("e")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendLog(nil, &tc.log)
			var got raft.Log
			if err := DecodeLog(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.log, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeCorrupt(t *testing.T) {
	valid := handBuilt.bytes
	for _, tc := range []struct {
		name    string
		corrupt func([]byte) []byte
		want    error
		offset  int
	}{
		{"empty", func([]byte) []byte { return nil }, ErrCorrupt, 0},
		{"version 0", func(b []byte) []byte { b[0] = 0; return b }, ErrCorrupt, 0},
		{"version 2", func(b []byte) []byte { b[0] = 2; return b }, ErrVersion, 0},
		{"header cut", func(b []byte) []byte { return b[:10] }, ErrCorrupt, 10},
		{"unknown flag", func(b []byte) []byte { b[2] |= 2; return b }, ErrCorrupt, 2},
		{"AppendedAt cut", func(b []byte) []byte { return b[:25] }, ErrCorrupt, 19},
		{"nanoseconds past a second", func(b []byte) []byte { copy(b[27:], []byte{0x00, 0xca, 0x9a, 0x3b}); return b }, ErrCorrupt, 27},
		{"zero time flagged", func(b []byte) []byte {
			copy(b[19:], []byte{0x00, 0x09, 0x6e, 0x88, 0xf1, 0xff, 0xff, 0xff, 0, 0, 0, 0}) // -62135596800 s
			return b
		}, ErrCorrupt, 19},
		{"no Data length", func(b []byte) []byte { return b[:31] }, ErrCorrupt, 31},
		{"Data past the end", func(b []byte) []byte { b[31] = 100; return b }, ErrCorrupt, 31},
		{"Data length not minimal", func(b []byte) []byte {
			return append(append(append([]byte{}, b[:31]...), 0x87, 0x00), b[32:]...)
		}, ErrCorrupt, 31},
		{"Data length overflows", func(b []byte) []byte {
			return append(append([]byte{}, b[:31]...), bytes.Repeat([]byte{0xff}, 11)...)
		}, ErrCorrupt, 31},
		{"no Extensions length", func(b []byte) []byte { return b[:39] }, ErrCorrupt, 39},
		{"Extensions past the end", func(b []byte) []byte { b[39] = 2; return b }, ErrCorrupt, 39},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrCorrupt, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.corrupt(bytes.Clone(valid))
			err := DecodeLog(b, new(raft.Log))
			var ce *CorruptError
			if !errors.Is(err, tc.want) || !errors.As(err, &ce) {
				t.Fatalf("DecodeLog = %v, want %v", err, tc.want)
			}
			if ce.Offset != tc.offset {
				t.Errorf("offset = %d, want %d (%v)", ce.Offset, tc.offset, err)
			}
		})
	}
}

// FuzzDecodeLog: DecodeLog never panics, and what it accepts AppendLog
// encodes to the same bytes, which decode to the same entry.
func FuzzDecodeLog(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.bin"))
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(AppendLog(nil, &raft.Log{}))
	f.Add(AppendLog(nil, &raft.Log{Index: 9, Term: 3, Type: raft.LogConfiguration, Data: []byte("conf")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := DecodeLog(b, &l); err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("DecodeLog error %v is not corruption", err)
			}
			return
		}
		if len(l.Data)+len(l.Extensions) > len(b) {
			t.Fatalf("decoded %d bytes of data from %d bytes", len(l.Data)+len(l.Extensions), len(b))
		}
		again := AppendLog(nil, &l)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, again)
		}
		var l2 raft.Log
		if err := DecodeLog(again, &l2); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(l, l2); diff != "" {
			t.Fatalf("decode, encode, decode (-first +second):\n%s", diff)
		}
	})
}
