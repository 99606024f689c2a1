package wal_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/wal"
)

func TestParseSegmentName(t *testing.T) {
	tests := []struct {
		name   string
		want   wal.SegmentNum
		wantOK bool
	}{
		{name: "log.000001", want: 1, wantOK: true},
		{name: "log.000042", want: 42, wantOK: true},
		{name: "log.999999", want: 999999, wantOK: true},
		{name: "log.1000000", want: 1000000, wantOK: true},
		{name: "log.1234567", want: 1234567, wantOK: true},
		{name: "log.4294967295", want: 1<<32 - 1, wantOK: true},
		{name: "log.4294967296"}, // past what a record header stores
		{name: "log.0000001"},    // non-canonical: would alias log.000001
		{name: "log.0001234567"},
		{name: "log.000000"},
		{name: "log.1"},
		{name: "log.00001"},
		{name: "log."},
		{name: "log"},
		{name: ""},
		{name: "log.-00001"},
		{name: "log.+00001"},
		{name: "log.00000a"},
		{name: "log.000001.tmp"},
		{name: "log.000001 "},
		{name: "LOG.000001"},
		{name: "xlog.000001"},
		{name: "snapshot"},
		{name: "log.99999999999999999999999"}, // overflows uint64
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := wal.ParseSegmentName(tt.name)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseSegmentName(%q) = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
			}
			if ok {
				if back := wal.SegmentName(got); back != tt.name {
					t.Errorf("SegmentName(%d) = %q, want %q", got, back, tt.name)
				}
			}
		})
	}
}

func TestSegmentNumString(t *testing.T) {
	tests := []struct {
		n    wal.SegmentNum
		want string
		path string
	}{
		{0, "000000", "db/log.000000"},
		{1, "000001", "db/log.000001"},
		{42, "000042", "db/log.000042"},
		{123456, "123456", "db/log.123456"},
		{999999, "999999", "db/log.999999"},
		{1234567, "1234567", "db/log.1234567"},
		{1<<64 - 1, "18446744073709551615", "db/log.18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.n.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := wal.SegmentPath("db", tt.n); got != tt.path {
				t.Errorf("SegmentPath = %q, want %q", got, tt.path)
			}
		})
	}
}

func TestCheckContiguous(t *testing.T) {
	tests := []struct {
		name     string
		segs     []wal.SegmentNum
		first    wal.SegmentNum
		wantFile string // the missing segment; "" for no error
	}{
		{name: "none", segs: nil, first: 1},
		{name: "one", segs: []wal.SegmentNum{1}, first: 1},
		{name: "three", segs: []wal.SegmentNum{1, 2, 3}, first: 1},
		{name: "starting after a snapshot", segs: []wal.SegmentNum{7, 8}, first: 7},
		{name: "gap in the middle", segs: []wal.SegmentNum{1, 2, 4, 5}, first: 1, wantFile: "db/log.000003"},
		{name: "first missing", segs: []wal.SegmentNum{2, 3}, first: 1, wantFile: "db/log.000001"},
		{name: "starts before first", segs: []wal.SegmentNum{1, 2}, first: 2, wantFile: "db/log.000002"},
		{name: "duplicate", segs: []wal.SegmentNum{1, 1, 2}, first: 1, wantFile: "db/log.000002"},
		{name: "gap at seven digits", segs: []wal.SegmentNum{999999, 1000001}, first: 999999, wantFile: "db/log.1000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wal.CheckContiguous("db", tt.segs, tt.first)
			if tt.wantFile == "" {
				if err != nil {
					t.Errorf("CheckContiguous: %v, want nil", err)
				}
				return
			}
			if err := checkCorrupt(err, wal.ErrCorrupt, tt.wantFile, -1); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestListSegments(t *testing.T) {
	fsys := newFS(t)
	for _, name := range []string{"log.000002", "log.000001", "log.0000003", "log.000000", "log.1000000",
		"snapshot", "snapshot.tmp", "LOCK", "log.000004.broken"} {
		f, err := fsys.Create(testDir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	got, err := wal.ListSegments(fsys, testDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []wal.SegmentNum{1, 2, 1000000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListSegments (-want +got):\n%s", diff)
	}
	if _, err := wal.ListSegments(fsys, "missing"); err == nil {
		t.Error("ListSegments of a missing directory: nil error")
	}
}
