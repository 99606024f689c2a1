package wal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvstore/kv/wal"
)

// TestSniff: what Sniff makes of the files a directory may hold under a
// segment's name, seeded by hand from FORMAT.md's header record.
func TestSniff(t *testing.T) {
	golden, err := os.ReadFile("testdata/segment.golden")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
		want wal.Sniffed
	}{
		{"a segment", golden, wal.SniffSegment},
		{"a segment whose header checksum is damaged", flip(golden, 17), wal.SniffSegment},
		{"a header record's frame alone", []byte{1, 0, 0, 0, 24, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, wal.SniffSegment},
		{"empty", nil, wal.SniffUnwritten},
		{"zeros", make([]byte, 5000), wal.SniffUnwritten},
		{"a header cut short", golden[:20], wal.SniffUnwritten},
		{"a text file", []byte("hello world this is a note\nline two of my notes\n"), wal.SniffForeign},
		{"one letter", []byte("x"), wal.SniffForeign},
		{"zeros, then text", append(make([]byte, 100), "text"...), wal.SniffForeign},
		{"a header frame of another length", flip(golden, 4), wal.SniffForeign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := memWithSegment(t, 1, tt.b)
			got, err := wal.Sniff(fsys, wal.SegmentPath(testDir, 1), 1)
			if err != nil || got != tt.want {
				t.Errorf("Sniff = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func flip(b []byte, at int) []byte {
	c := bytes.Clone(b)
	c[at] ^= 0x10
	return c
}

// FuzzSniff feeds arbitrary bytes to Sniff: it never fails on content and
// never panics, a file that starts with a valid segment's header record
// is a segment, and one whose header is cut short is unwritten.
func FuzzSniff(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.golden")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:20])
		f.Add(flip(b, 0))
	}
	f.Add([]byte("hello"))
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := memWithSegment(t, 1, data)
		got, err := wal.Sniff(fsys, wal.SegmentPath(testDir, 1), 1)
		if err != nil {
			t.Fatalf("Sniff failed on content: %v", err)
		}
		r := &wal.Reader{FS: fsys, Dir: testDir}
		if info, err := r.Scan(1, true, nil); err == nil && info.End > 0 && got != wal.SniffSegment {
			t.Fatalf("a segment that scans to offset %d sniffed as %v", info.End, got)
		}
	})
}
