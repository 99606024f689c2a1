package wal_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/wal"
)

// TestMaxSizeRecordReadBack: a record whose payload is exactly the
// maximum record size reads back whole, in the middle of a segment, as
// the last record of the newest segment (where a reader off by one
// would cut an acknowledged record as a torn tail), as the last record
// before a seal, and alone; with the reader's window smaller than the
// record, exactly its size, and the default; with preallocated zeros
// after it and without. A reader whose bound is one byte less refuses it
// as corruption at its offset, never as a torn tail.
func TestMaxSizeRecordReadBack(t *testing.T) {
	const maxRec = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	full := func() []byte {
		p := make([]byte, maxRec)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		return p
	}
	small := []byte("small")
	zeros := make([]byte, maxRec) // scrambled on disk, so never zeros there
	layouts := []struct {
		name string
		ps   [][]byte
		seal bool // Rotate after the records: the segment is sealed
	}{
		{name: "mid-segment", ps: [][]byte{small, full(), small}},
		{name: "last record", ps: [][]byte{small, full()}},
		{name: "two in a row, last", ps: [][]byte{full(), full()}},
		{name: "only record", ps: [][]byte{full()}},
		{name: "zeros, last", ps: [][]byte{small, zeros}},
		{name: "last before the seal", ps: [][]byte{small, full()}, seal: true},
	}
	windows := []struct {
		name string
		n    int // 0: the default
	}{
		{"default window", 0},
		{"window of the record", recHeaderSize + maxRec},
		{"window smaller than the record", 300},
	}
	for _, lay := range layouts {
		for _, prealloc := range []int64{0, 4096} {
			opts := wal.Options{MaxRecordSize: maxRec, Preallocate: prealloc}
			fsys := newFS(t)
			w, err := wal.Create(fsys, testDir, 1, opts)
			if err != nil {
				t.Fatal(err)
			}
			// One Append a record, so that each is framed alone.
			for _, p := range lay.ps {
				if _, err := w.Append(p); err != nil {
					t.Fatalf("%s: Append of %d bytes: %v", lay.name, len(p), err)
				}
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			if lay.seal {
				if _, err := w.Rotate(); err != nil {
					t.Fatal(err)
				}
			}
			// No Close: no mark follows the last record, which is the
			// segment's last bytes but for zeros (or the seal).
			want := recordsFor(1, lay.ps)
			wantEnd := recordsEnd(lay.ps)
			if lay.seal {
				wantEnd += recHeaderSize
			}
			for _, win := range windows {
				name := lay.name + "/" + win.name
				if prealloc > 0 {
					name += "/preallocated"
				}
				t.Run(name, func(t *testing.T) {
					// The live file system, and what a power loss leaves:
					// every record was synced.
					for _, fs := range []struct {
						name  string
						crash bool
					}{{"live", false}, {"after a power loss", true}} {
						src := fsys
						if fs.crash {
							src = fsys.CrashClone()
						}
						r := &wal.Reader{FS: src, Dir: testDir, MaxRecordSize: maxRec}
						if win.n > 0 {
							wal.SetWindow(r, win.n)
						}
						var got []scanned
						info, err := r.Scan(1, !lay.seal, func(rec wal.Record) error {
							got = append(got, scanned{Segment: rec.Segment, Offset: rec.Offset, Payload: bytes.Clone(rec.Payload)})
							return nil
						})
						if err != nil {
							t.Fatalf("%s: Scan: %v", fs.name, err)
						}
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("%s: records (-want +got):\n%s", fs.name, diff)
						}
						if info.Torn || info.End != wantEnd || info.Sealed != lay.seal {
							t.Errorf("%s: torn %v (%s), end %d, sealed %v; want not torn, end %d, sealed %v",
								fs.name, info.Torn, info.TornReason, info.End, info.Sealed, wantEnd, lay.seal)
						}
					}
					// A reader bound one byte smaller: corruption at the
					// first full-size record, not a torn tail.
					r := &wal.Reader{FS: fsys, Dir: testDir, MaxRecordSize: maxRec - 1}
					if win.n > 0 {
						wal.SetWindow(r, win.n)
					}
					var off int64 = -1
					for _, rec := range want {
						if len(rec.Payload) == maxRec {
							off = rec.Offset
							break
						}
					}
					_, err := r.Scan(1, !lay.seal, nil)
					var ce *wal.CorruptError
					if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorrupt) || ce.Offset != off {
						t.Errorf("a reader bound to %d bytes: %v, want corruption at offset %d", maxRec-1, err, off)
					}
				})
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// And one byte more is refused before anything is written.
	fsys := newFS(t)
	w, err := wal.Create(fsys, testDir, 1, wal.Options{MaxRecordSize: maxRec})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(make([]byte, maxRec+1)); !errors.Is(err, wal.ErrTooLarge) {
		t.Errorf("Append of %d bytes: %v, want ErrTooLarge", maxRec+1, err)
	}
}
