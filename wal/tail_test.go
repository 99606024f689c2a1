package wal_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// tailAll reads segment 1 of fsys with a Tail in one call, or in two with
// the first limit bytes visible first (a writer still appending).
func tailAll(t *testing.T, data []byte, limit int, nextExists bool) ([][]byte, error) {
	t.Helper()
	fsys := memWithSegment(t, 1, data[:limit])
	tl, err := wal.OpenTail(fsys, testDir, 1, fuzzMaxRecord)
	if err != nil {
		return nil, err
	}
	defer tl.Close()
	var got [][]byte
	collect := func(r wal.Record) error {
		got = append(got, bytes.Clone(r.Payload))
		return nil
	}
	if err := tl.Next(false, collect); err != nil {
		return got, err
	}
	f, err := fsys.OpenReadWrite(wal.SegmentPath(testDir, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = tl.Next(nextExists, collect)
	return got, err
}

// scanPayloads returns the payloads Scan yields before it stops.
func scanPayloads(t *testing.T, data []byte, newest bool) ([][]byte, wal.SegmentInfo, error) {
	fsys := memWithSegment(t, 1, data)
	var got [][]byte
	r := &wal.Reader{FS: fsys, Dir: testDir, MaxRecordSize: fuzzMaxRecord}
	info, err := r.Scan(1, newest, func(rec wal.Record) error {
		got = append(got, bytes.Clone(rec.Payload))
		return nil
	})
	return got, info, err
}

func payloadPrefix(a, b [][]byte) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// checkTail: what a Tail returns, read at once or in two steps, is a
// prefix of what Scan reads from the same bytes; of a sealed segment
// whose successor exists, Scan's whole list.
func checkTail(t *testing.T, data []byte) {
	scan, info, scanErr := scanPayloads(t, data, true)
	for _, limit := range []int{len(data), len(data) / 2} {
		for _, next := range []bool{false, true} {
			got, err := tailAll(t, data, limit, next)
			if errors.Is(err, io.ErrUnexpectedEOF) && limit < len(data) {
				continue // the header was not there yet
			}
			if err != nil && scanErr == nil {
				if _, herr := wal.OpenTail(memWithSegment(t, 1, data), testDir, 1, fuzzMaxRecord); herr == nil {
					t.Fatalf("tail error %v where Scan reads the segment", err)
				}
				continue
			}
			if !payloadPrefix(got, scan) {
				t.Fatalf("limit %d next %v: the tail returned %d records that are not a prefix of Scan's %d", limit, next, len(got), len(scan))
			}
			if next && scanErr == nil && info.Sealed && len(got) != len(scan) {
				t.Fatalf("sealed segment with a successor: the tail returned %d of %d records", len(got), len(scan))
			}
		}
	}
}

func FuzzTail(f *testing.F) {
	files, err := filepath.Glob("testdata/*.golden")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-24])
		f.Add(append(bytes.Clone(b), make([]byte, 100)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		checkTail(t, data)
	})
}

// TestTailVouched: a record is returned only once a later record claims
// it synced, and a sealed segment's last records once the next segment
// exists.
func TestTailVouched(t *testing.T) {
	fsys := newFS(t)
	w, err := wal.Create(fsys, testDir, 1, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := wal.OpenTail(fsys, testDir, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var got []string
	read := func(next bool) {
		t.Helper()
		if err := tl.Next(next, func(r wal.Record) error {
			got = append(got, string(r.Payload))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	read(false)
	if len(got) != 0 {
		t.Fatalf("an unsynced record was returned: %q", got)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	read(false)
	if len(got) != 0 {
		t.Fatalf("a synced record no later record vouches for was returned: %q", got)
	}
	if err := w.Mark(); err != nil {
		t.Fatal(err)
	}
	read(false)
	if len(got) != 1 || got[0] != "a" {
		t.Fatalf("after the mark: %q, want [a]", got)
	}
	if _, err := w.Append([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Rotate(); err != nil {
		t.Fatal(err)
	}
	// Rotate synced b before it created the next segment, and the seal
	// claims it: b is vouched for, but the segment is not done until the
	// next one is known.
	read(false)
	if len(got) != 2 || tl.Done() {
		t.Fatalf("before the next segment is known: %q, done %v", got, tl.Done())
	}
	read(true)
	if len(got) != 2 || got[1] != "b" || !tl.Done() {
		t.Fatalf("sealed, next exists: %q, done %v", got, tl.Done())
	}
	w.Close()
	var _ vfs.FS = fsys
}
