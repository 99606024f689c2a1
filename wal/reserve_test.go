package wal_test

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// blindFS hides the free space of the file system it wraps: the writer
// then learns that the disk is full only from ENOSPC.
type blindFS struct{ vfs.FS }

// TestReserveFullDisk: on a 2 MiB disk, the log's 1 MiB reservations
// ahead of the records must not make the disk full at half use (the
// issue's finding): the look-ahead is at most half the free space, and a
// reservation that does not fit is retried for the records alone. The
// records fill most of the disk, with statfs and without; and the
// failure, when it comes, is ENOSPC before any byte of the record that
// did not fit.
func TestReserveFullDisk(t *testing.T) {
	// A 2 MiB disk, less what the file system keeps for itself: a
	// second 1 MiB step does not fit.
	const capacity = 2<<20 - 20<<10
	for _, tc := range []struct {
		name  string
		blind bool
	}{{"free space known", false}, {"free space unknown", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newFS(t)
			mem.SetCapacity(capacity)
			var fsys vfs.FS = mem
			if tc.blind {
				fsys = blindFS{mem}
			}
			w, err := wal.Create(fsys, testDir, 1, wal.Options{Preallocate: 1 << 20, SegmentSize: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			payload := make([]byte, 2000)
			written := 0
			for i := 1; ; i++ {
				if _, err := w.Append(payload); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("after %d bytes: %v, want ENOSPC", written, err)
					}
					break
				}
				written += len(payload)
				if i%16 == 0 {
					if err := w.Sync(); err != nil {
						t.Fatalf("sync after %d bytes: %v", written, err)
					}
				}
			}
			w.Close()
			if written < capacity*9/10 {
				t.Errorf("%d bytes of records on a disk of %d: full at %d%%", written, capacity, written*100/capacity)
			}
			t.Logf("%d bytes of records on a disk of %d (%d%%)", written, capacity, written*100/capacity)
			// Everything synced reads back.
			mem.SetCapacity(0)
			r := &wal.Reader{FS: mem, Dir: testDir}
			info, err := r.Scan(1, true, nil)
			if err != nil || info.Records*len(payload) != written || info.Torn {
				t.Errorf("scan: %+v, %v; want %d records", info, err, written/len(payload))
			}
		})
	}
}

// TestReserveSteps: a segment's reservation starts at 16 KiB and doubles
// up to Options.Preallocate, then grows by it: an open scans the newest
// segment to its end, so a new segment (a checkpoint's, a short-lived
// process's) must not start with a megabyte of zeros.
func TestReserveSteps(t *testing.T) {
	mem := newFS(t)
	w, err := wal.Create(mem, testDir, 1, wal.Options{Preallocate: 1 << 20, SegmentSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var sizes []int64
	payload := make([]byte, 4000)
	for range 1000 {
		if _, err := w.Append(payload); err != nil {
			t.Fatal(err)
		}
		fi, err := mem.Stat(wal.SegmentPath(testDir, 1))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(sizes); n == 0 || sizes[n-1] != fi.Size() {
			sizes = append(sizes, fi.Size())
		}
	}
	want := []int64{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 3 << 20, 4 << 20}
	if len(sizes) < len(want) || !slices.Equal(sizes[:len(want)], want) {
		t.Fatalf("the segment's sizes as it grew: %v, want %v first", sizes, want)
	}
}
