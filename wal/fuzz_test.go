package wal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/kvstore/kv/wal"
)

// fuzzMaxRecord is the record size bound of FuzzScan: small, so that a
// length field the fuzzer makes up is more often checked than not.
const fuzzMaxRecord = 1 << 10

// FuzzScan feeds arbitrary bytes to Scan as a segment, in both modes. It is
// seeded from testdata/: the golden segment and damaged variants of it.
func FuzzScan(f *testing.F) {
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
		for _, cut := range []int{0, 1, 23, 24, 39, 40, 41, 60, len(b) - 24, len(b) - 1} {
			if cut >= 0 && cut <= len(b) {
				f.Add(b[:cut]) // torn
			}
		}
		for _, pos := range []int{0, 5, 8, 12, 16, 30, 45, 80, len(b) - 3} {
			c := bytes.Clone(b)
			c[pos] ^= 0x40 // a flipped bit
			f.Add(c)
		}
		f.Add(append(bytes.Clone(b), make([]byte, 4096)...))                         // preallocated
		f.Add(append(bytes.Clone(b), 0, 0, 0, 7))                                    // garbage after the seal
		f.Add(append(bytes.Clone(b[:len(b)-24]), make([]byte, 100)...))              // seal lost
		f.Add(append(bytes.Clone(b[:len(b)-24]), bytes.Repeat([]byte{0xff}, 64)...)) // seal torn
		hole := bytes.Clone(b)
		clear(hole[48:100]) // a lost page before synced records
		f.Add(hole)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := memWithSegment(t, 1, data)
		file := wal.SegmentPath(testDir, 1)
		var results [2]struct {
			info     wal.SegmentInfo
			err      error
			payloads [][]byte
		}
		for i, newest := range []bool{true, false} {
			r := &wal.Reader{FS: fsys, Dir: testDir, MaxRecordSize: fuzzMaxRecord}

			// First pass: no allocation in the callback, so that what
			// Scan allocates can be measured: the file's bytes and a
			// little more, whatever the length fields claim.
			next := int64(segHeaderRec)
			chained := true
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			info, err := r.Scan(1, newest, func(rec wal.Record) error {
				if rec.Segment != 1 || rec.Offset != next || len(rec.Payload) > fuzzMaxRecord {
					chained = false
				}
				next = rec.Offset + recHeaderSize + int64(len(rec.Payload))
				return nil
			})
			runtime.ReadMemStats(&ms)
			if alloc := ms.TotalAlloc - before; alloc > uint64(len(data))+256<<10 {
				t.Errorf("newest=%v: Scan of %d bytes allocated %d bytes", newest, len(data), alloc)
			}
			if !chained {
				t.Errorf("newest=%v: records are not a contiguous run after the header", newest)
			}

			// Second pass: the same result, with the payloads kept.
			collect := func(r *wal.Reader) (wal.SegmentInfo, [][]byte, error) {
				var payloads [][]byte
				info, err := r.Scan(1, newest, func(rec wal.Record) error {
					payloads = append(payloads, bytes.Clone(rec.Payload))
					return nil
				})
				return info, payloads, err
			}
			info2, payloads, err2 := collect(r)
			if info2 != info || !sameError(err, err2) {
				t.Fatalf("newest=%v: two scans differ: %+v, %v and %+v, %v", newest, info, err, info2, err2)
			}

			// Third pass: the same, read a few bytes at a time, so that
			// records and the zeros after them straddle read windows.
			small := &wal.Reader{FS: fsys, Dir: testDir, MaxRecordSize: fuzzMaxRecord}
			wal.SetWindow(small, 1+len(data)%37)
			info3, payloads3, err3 := collect(small)
			if info3 != info || !sameError(err, err3) {
				t.Fatalf("newest=%v: scans with a small window differ: %+v, %v and %+v, %v", newest, info, err, info3, err3)
			}
			results[i].info, results[i].err, results[i].payloads = info, err, payloads
			if !slices.EqualFunc(payloads, payloads3, bytes.Equal) {
				t.Fatalf("newest=%v: a small window reads other payloads", newest)
			}

			if info.Size != int64(len(data)) || info.End < 0 || info.End > info.Size {
				t.Fatalf("newest=%v: Size %d End %d for %d bytes", newest, info.Size, info.End, len(data))
			}
			if err != nil {
				if !errors.Is(err, wal.ErrCorrupt) && !errors.Is(err, wal.ErrVersion) {
					t.Fatalf("newest=%v: %v, want ErrCorrupt or ErrVersion", newest, err)
				}
				var ce *wal.CorruptError
				if !errors.As(err, &ce) || ce.File != file || ce.Offset < 0 || ce.Offset > int64(len(data)) {
					t.Fatalf("newest=%v: %#v does not name the file and an offset in it", newest, err)
				}
				continue
			}
			if info.Records != len(payloads) || (len(payloads) > 0 && next != info.End && !info.Sealed) {
				t.Fatalf("newest=%v: %d records, %d payloads, last ends at %d, End %d", newest, info.Records, len(payloads), next, info.End)
			}
			if info.Torn != !allZero(data[info.End:]) || (info.Torn && !newest) {
				t.Fatalf("newest=%v: Torn=%v with %d bytes after End", newest, info.Torn, len(data)-int(info.End))
			}
			if !newest && !info.Sealed {
				t.Fatalf("newest=false: success without a seal")
			}

			// Any prefix of a valid log replays to a prefix of its
			// records: the valid prefix replays to all of them, cleanly.
			cut := memWithSegment(t, 1, data[:info.End])
			got, cutInfo, err := scanSegment(cut, 1, newest)
			if err != nil || cutInfo.End != info.End || cutInfo.Torn || cutInfo.Sealed != info.Sealed || !samePayloads(payloads, got) {
				t.Fatalf("newest=%v: the valid prefix scans as %+v, %v; want the same records", newest, cutInfo, err)
			}

			// Written again by a Writer, the records read back the same.
			re := newFS(t)
			w, err := wal.Create(re, testDir, 1, wal.Options{MaxRecordSize: fuzzMaxRecord})
			if err != nil {
				t.Fatal(err)
			}
			if len(payloads) > 0 {
				if _, err := w.Append(payloads...); err != nil {
					t.Fatalf("re-encoding: %v", err)
				}
			}
			if info.Sealed {
				if _, err := w.Rotate(); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, reInfo, err := scanSegment(re, 1, !info.Sealed)
			if err != nil || reInfo.Torn || reInfo.Sealed != info.Sealed || !samePayloads(payloads, got) {
				t.Fatalf("newest=%v: re-encoded records scan as %+v, %v; want the same payloads", newest, reInfo, err)
			}
		}
		// A segment that scans as sealed also scans as the newest, with
		// the same records: the sealed rules are the stricter.
		n, s := results[0], results[1]
		if s.err == nil && (n.err != nil || n.info != s.info || !samePayloadLists(n.payloads, s.payloads)) {
			t.Fatalf("sealed scan %+v succeeded, newest scan %+v, %v differs", s.info, n.info, n.err)
		}
	})
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

func samePayloads(want [][]byte, got []scanned) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if !bytes.Equal(want[i], got[i].Payload) {
			return false
		}
	}
	return true
}

func samePayloadLists(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
