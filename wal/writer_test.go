package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

func TestWriterAppendScan(t *testing.T) {
	ps := payloads(6)
	tests := []struct {
		name    string
		batches [][][]byte // one Append call per batch
		sync    bool       // Sync after every Append
	}{
		{name: "one record", batches: [][][]byte{{[]byte("hello")}}},
		{name: "empty payload", batches: [][][]byte{{{}}}},
		{name: "one append per record", batches: [][][]byte{{ps[0]}, {ps[1]}, {ps[2]}, {ps[3]}}},
		{name: "many payloads in one append", batches: [][][]byte{{ps[0], ps[1], ps[2], ps[3], ps[4], ps[5]}}},
		{name: "mixed batches with syncs", batches: [][][]byte{{ps[0]}, {ps[1], ps[2]}, {}, {ps[3], ps[4], ps[5]}}, sync: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newFS(t)
			w, err := wal.Create(fsys, testDir, 3, wal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var all [][]byte
			for _, batch := range tt.batches {
				want := wal.Position{Segment: 3, Offset: segHeaderRec}
				for _, p := range all {
					want.Offset += recHeaderSize + int64(len(p))
				}
				pos, err := w.Append(batch...)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, pos); diff != "" {
					t.Errorf("Append position (-want +got):\n%s", diff)
				}
				all = append(all, batch...)
				if tt.sync {
					if err := w.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			end := w.Offset()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, info, err := scanSegment(fsys, 3, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(recordsFor(3, all), got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			// Close synced, then marked the segment durable up to end.
			wantInfo := wal.SegmentInfo{Segment: 3, Size: end + recHeaderSize, End: end + recHeaderSize, Records: len(all),
				Marks: 1, Synced: end, DataEnd: end}
			if diff := cmp.Diff(wantInfo, info); diff != "" {
				t.Errorf("SegmentInfo (-want +got):\n%s", diff)
			}
			// Close synced: a power loss now keeps every record.
			got, _, err = scanSegment(fsys.CrashClone(), 3, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(recordsFor(3, all), got); diff != "" {
				t.Errorf("records after a crash (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriterTooLarge(t *testing.T) {
	tests := []struct {
		name    string
		opts    wal.Options
		payload [][]byte
		wantErr error
	}{
		{name: "at the limit", opts: wal.Options{MaxRecordSize: 100}, payload: [][]byte{make([]byte, 100)}},
		{name: "one past the limit", opts: wal.Options{MaxRecordSize: 100}, payload: [][]byte{make([]byte, 101)}, wantErr: wal.ErrTooLarge},
		{name: "second of a batch too large", opts: wal.Options{MaxRecordSize: 100},
			payload: [][]byte{make([]byte, 10), make([]byte, 101)}, wantErr: wal.ErrTooLarge},
		{name: "past the default limit", payload: [][]byte{make([]byte, wal.DefaultMaxRecordSize+1)}, wantErr: wal.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newFS(t)
			w, err := wal.Create(fsys, testDir, 1, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			_, err = w.Append(tt.payload...)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Append: %v, want %v", err, tt.wantErr)
			}
			wantOff := int64(segHeaderRec)
			if tt.wantErr == nil {
				for _, p := range tt.payload {
					wantOff += recHeaderSize + int64(len(p))
				}
			}
			if got := w.Offset(); got != wantOff {
				t.Errorf("Offset after Append = %d, want %d (a refused batch writes nothing)", got, wantOff)
			}
			// A refused payload is the caller's error, not an I/O failure:
			// the writer goes on.
			if _, err := w.Append([]byte("after")); err != nil {
				t.Errorf("Append after the refused one: %v", err)
			}
		})
	}
}

func TestWriterRotation(t *testing.T) {
	const segSize = 512
	fsys := newFS(t)
	w, err := wal.Create(fsys, testDir, 1, wal.Options{SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	ps := payloads(60)
	var want []scanned
	for i, p := range ps {
		pos, err := w.Append(p)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, scanned{Segment: pos.Segment, Offset: pos.Offset, Payload: p})
		if i%7 == 0 {
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	segs, err := wal.ListSegments(fsys, testDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 5 {
		t.Fatalf("segments %v: want at least 5 with a %d-byte segment size", segs, segSize)
	}
	if err := wal.CheckContiguous(testDir, segs, 1); err != nil {
		t.Fatal(err)
	}
	var got []scanned
	for i, s := range segs {
		newest := i == len(segs)-1
		recs, info, err := scanSegment(fsys, s, newest)
		if err != nil {
			t.Fatalf("segment %s (newest=%v): %v", s, newest, err)
		}
		if info.Sealed == newest || info.Torn {
			t.Errorf("segment %s: Sealed=%v Torn=%v, want Sealed=%v Torn=false", s, info.Sealed, info.Torn, !newest)
		}
		if !newest {
			// Sealed as soon as it passed the segment size: its last data
			// record began before the limit and ended at or past it.
			last := recs[len(recs)-1]
			if last.Offset >= segSize || info.End-recHeaderSize < segSize {
				t.Errorf("segment %s: last record at %d, data end %d; want the rotation right after passing %d",
					s, last.Offset, info.End-recHeaderSize, segSize)
			}
		}
		got = append(got, recs...)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records across segments (-want +got):\n%s", diff)
	}
}

func TestWriterRotate(t *testing.T) {
	fsys := newFS(t)
	w, err := wal.Create(fsys, testDir, 4, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for want := wal.SegmentNum(4); want < 7; want++ {
		if _, err := w.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
		got, err := w.Rotate()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("Rotate = %s, want %s", got, want)
		}
		if s, off := w.Segment(), w.Offset(); s != want+1 || off != segHeaderRec {
			t.Errorf("after Rotate: Segment=%s Offset=%d, want %s and %d", s, off, want+1, segHeaderRec)
		}
		// The seal and the next segment's name are durable when Rotate
		// returns.
		crashed := fsys.CrashClone()
		if _, info, err := scanSegment(crashed, want, false); err != nil || !info.Sealed || info.Records != 1 {
			t.Errorf("sealed segment %s after a crash: %+v, %v", want, info, err)
		}
		if _, err := crashed.Stat(wal.SegmentPath(testDir, want+1)); err != nil {
			t.Errorf("segment %s after a crash: %v", want+1, err)
		}
	}
}

var errInjected = errors.New("injected I/O error")

// faultFS wraps a file system so that the n-th WriteAt or Sync of a file
// it created or opened fails, once. Directory syncs are not affected.
type faultFS struct {
	vfs.FS
	failWrite int // fail the failWrite-th next WriteAt; 0: none
	failSync  int // fail the failSync-th next file Sync; 0: none
	writes    int // WriteAt calls that reached the file system
	syncs     int // Sync calls that reached the file system
}

func (f *faultFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) OpenReadWrite(name string) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	vfs.File
	fs *faultFS
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failWrite > 0 {
		f.fs.failWrite--
		if f.fs.failWrite == 0 {
			// A short write, as a full disk gives.
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, errInjected
		}
	}
	f.fs.writes++
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if f.fs.failSync > 0 {
		f.fs.failSync--
		if f.fs.failSync == 0 {
			return errInjected
		}
	}
	f.fs.syncs++
	return f.File.Sync()
}

func TestWriterFailStop(t *testing.T) {
	tests := []struct {
		name    string
		opts    wal.Options
		before  func(w *wal.Writer) error // runs before the fault is armed
		arm     func(f *faultFS)
		failing func(w *wal.Writer) error // the call that meets the fault
	}{
		{
			name:    "append write fails",
			arm:     func(f *faultFS) { f.failWrite = 1 },
			failing: func(w *wal.Writer) error { _, err := w.Append([]byte("lost")); return err },
		},
		{
			name:    "sync fails",
			before:  func(w *wal.Writer) error { _, err := w.Append([]byte("maybe lost")); return err },
			arm:     func(f *faultFS) { f.failSync = 1 },
			failing: func(w *wal.Writer) error { return w.Sync() },
		},
		{
			name:    "seal write fails in Rotate",
			arm:     func(f *faultFS) { f.failWrite = 1 },
			failing: func(w *wal.Writer) error { _, err := w.Rotate(); return err },
		},
		{
			name:    "seal sync fails in Rotate",
			arm:     func(f *faultFS) { f.failSync = 1 },
			failing: func(w *wal.Writer) error { _, err := w.Rotate(); return err },
		},
		{
			name:    "next segment's header write fails in Rotate",
			arm:     func(f *faultFS) { f.failWrite = 2 },
			failing: func(w *wal.Writer) error { _, err := w.Rotate(); return err },
		},
		{
			name:    "seal write fails in an automatic rotation",
			opts:    wal.Options{SegmentSize: 64},
			before:  func(w *wal.Writer) error { _, err := w.Append(make([]byte, 64)); return err },
			arm:     func(f *faultFS) { f.failWrite = 1 },
			failing: func(w *wal.Writer) error { _, err := w.Append([]byte("next")); return err },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := &faultFS{FS: newFS(t)}
			w, err := wal.Create(fsys, testDir, 1, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tt.before != nil {
				if err := tt.before(w); err != nil {
					t.Fatal(err)
				}
			}
			tt.arm(fsys)
			if err := tt.failing(w); !errors.Is(err, errInjected) {
				t.Fatalf("failing call: %v, want the injected error", err)
			}
			if fsys.failWrite != 0 || fsys.failSync != 0 {
				t.Fatalf("the fault was not met (failWrite=%d failSync=%d)", fsys.failWrite, fsys.failSync)
			}
			writes, syncs := fsys.writes, fsys.syncs
			later := []struct {
				name string
				call func() error
			}{
				{"Append", func() error { _, err := w.Append([]byte("after")); return err }},
				{"Sync", w.Sync},
				{"Rotate", func() error { _, err := w.Rotate(); return err }},
				{"Append again", func() error { _, err := w.Append([]byte("after")); return err }},
				{"Sync again", w.Sync},
				{"Close", w.Close},
			}
			for _, c := range later {
				if err := c.call(); !errors.Is(err, wal.ErrFailed) {
					t.Errorf("%s after the failure: %v, want ErrFailed", c.name, err)
				}
			}
			// Fail-stop: nothing was written and, above all, no sync was
			// retried, since it could "succeed" over lost pages.
			if fsys.writes != writes || fsys.syncs != syncs {
				t.Errorf("after the failure: %d writes and %d syncs reached the file, want none",
					fsys.writes-writes, fsys.syncs-syncs)
			}
		})
	}
}

func TestWriterClosed(t *testing.T) {
	fsys := newFS(t)
	w, err := wal.Create(fsys, testDir, 1, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if _, err := w.Append([]byte("x")); !errors.Is(err, wal.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
	if err := w.Sync(); !errors.Is(err, wal.ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
	if _, err := w.Rotate(); !errors.Is(err, wal.ErrClosed) {
		t.Errorf("Rotate after Close: %v, want ErrClosed", err)
	}
}

func TestCreateExisting(t *testing.T) {
	fsys := newFS(t)
	writeSynced(t, fsys, 1, payloads(2), wal.Options{}, false)
	before := readSegment(t, fsys, 1)
	if _, err := wal.Create(fsys, testDir, 1, wal.Options{}); err == nil {
		t.Fatal("Create over an existing segment succeeded")
	}
	if !bytes.Equal(before, readSegment(t, fsys, 1)) {
		t.Error("Create over an existing segment changed it")
	}
	if _, err := wal.Create(fsys, testDir, 0, wal.Options{}); err == nil {
		t.Error("Create of segment 0 succeeded")
	}
}

func TestOpenAppend(t *testing.T) {
	first, second := payloads(3), payloads(5)[3:]
	tests := []struct {
		name   string
		prep   func(t *testing.T, fsys vfs.FS) // leaves segment 1 behind
		before [][]byte                        // records prep wrote
	}{
		{
			name:   "after records",
			prep:   func(t *testing.T, fsys vfs.FS) { writeSynced(t, fsys, 1, first, wal.Options{}, false) },
			before: first,
		},
		{
			name: "header only",
			prep: func(t *testing.T, fsys vfs.FS) { writeSynced(t, fsys, 1, nil, wal.Options{}, false) },
		},
		{
			name: "preallocated zeros after the records",
			prep: func(t *testing.T, fsys vfs.FS) {
				writeSynced(t, fsys, 1, first, wal.Options{Preallocate: 4096}, false)
			},
			before: first,
		},
		{
			name: "created but the header never written",
			prep: func(t *testing.T, fsys vfs.FS) {
				f, err := fsys.Create(wal.SegmentPath(testDir, 1))
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newFS(t)
			tt.prep(t, fsys)
			_, info, err := scanSegment(fsys, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			w, err := wal.OpenAppend(fsys, testDir, info, wal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			end, synced := info.End, info.Synced
			if info.DataEnd > info.Synced {
				synced = end // written again and synced: every record is durable
			}
			if end == 0 {
				// OpenAppend wrote a header and synced it.
				end, synced = segHeaderRec, segHeaderRec
			}
			pos, err := w.Append(second...)
			if err != nil {
				t.Fatal(err)
			}
			if want := (wal.Position{Segment: 1, Offset: end}); pos != want {
				t.Errorf("first Append after OpenAppend at %+v, want %+v", pos, want)
			}
			// The new records claim what a record in the segment claimed
			// durable, or, when OpenAppend wrote and synced the records
			// past that, all of them.
			b := readSegment(t, fsys, 1)
			if got := binary.LittleEndian.Uint64(b[end+8:]); got != uint64(synced) {
				t.Errorf("synced offset of the first new record = %d, want %d", got, synced)
			}
			// Close syncs, so a power loss keeps old and new records.
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := append(recordsFor(1, tt.before), recordsFrom(1, end, second)...)
			got, info, err := scanSegment(fsys.CrashClone(), 1, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if info.Torn || info.Sealed {
				t.Errorf("SegmentInfo %+v: want neither torn nor sealed", info)
			}
		})
	}
}

func TestSealTail(t *testing.T) {
	ps := payloads(4)
	// writeSynced without a seal leaves the mark Close writes after the
	// records; the seal then claims what the mark did.
	marked := recordsEnd(ps) + recHeaderSize
	tests := []struct {
		name       string
		prep       func(t *testing.T, fsys *vfs.MemFS) // leaves segment 1 behind
		wantRecs   [][]byte
		wantTorn   bool
		wantFinal  int64 // size of the sealed segment
		wantMarks  int
		wantSynced int64 // what the records of the sealed segment claim
	}{
		{
			name: "torn tail",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				writeSynced(t, fsys, 1, ps, wal.Options{}, false)
				b := readSegment(t, fsys, 1)
				torn := frame(typeData, saltOf(b), uint64(len(b)), []byte("never finished"))
				appendBytes(t, fsys, 1, torn[:len(torn)-5])
			},
			wantRecs:  ps,
			wantTorn:  true,
			wantFinal: marked + recHeaderSize, wantMarks: 1, wantSynced: recordsEnd(ps),
		},
		{
			name: "zeros after the records",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				writeSynced(t, fsys, 1, ps, wal.Options{Preallocate: 8192}, false)
			},
			wantRecs:  ps,
			wantFinal: marked + recHeaderSize, wantMarks: 1, wantSynced: recordsEnd(ps),
		},
		{
			name: "already sealed, zeros after",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				writeSynced(t, fsys, 1, ps, wal.Options{Preallocate: 8192}, true)
			},
			wantRecs:  ps,
			wantFinal: recordsEnd(ps) + recHeaderSize, wantSynced: recordsEnd(ps),
		},
		{
			name: "header only",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				// Close would mark it: a writer that stops after
				// Create, as a crash does, leaves the header alone.
				w, err := wal.Create(fsys, testDir, 1, wal.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Abandon(); err != nil {
					t.Fatal(err)
				}
			},
			wantFinal: segHeaderRec + recHeaderSize,
		},
		{
			name: "empty file",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				f, err := fsys.Create(wal.SegmentPath(testDir, 1))
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				syncDir(t, fsys) // as Create would have
			},
			wantFinal: segHeaderRec + recHeaderSize,
		},
		{
			name: "torn header",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				f, err := fsys.Create(wal.SegmentPath(testDir, 1))
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt(frame(typeHeader, 7, 0, headerPayload("KVWL", 2, 1, 7))[:30], 0)
				f.Close()
				syncDir(t, fsys) // as Create would have
			},
			wantTorn:  true,
			wantFinal: segHeaderRec + recHeaderSize,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newFS(t)
			tt.prep(t, fsys)
			_, info, err := scanSegment(fsys, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			if info.Torn != tt.wantTorn {
				t.Fatalf("before SealTail: Torn=%v (%s), want %v", info.Torn, info.TornReason, tt.wantTorn)
			}
			if _, _, err := scanSegment(fsys, 1, false); !info.Sealed && !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("before SealTail, scanning as sealed: %v, want ErrCorrupt", err)
			}
			if err := wal.SealTail(fsys, testDir, info, nil); err != nil {
				t.Fatal(err)
			}
			// Durable: scan what a power loss leaves.
			crashed := fsys.CrashClone()
			got, sealed, err := scanSegment(crashed, 1, false)
			if err != nil {
				t.Fatalf("after SealTail, scanning as sealed: %v", err)
			}
			if diff := cmp.Diff(recordsFor(1, tt.wantRecs), got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			want := wal.SegmentInfo{Segment: 1, Size: tt.wantFinal, End: tt.wantFinal, Records: len(tt.wantRecs), Sealed: true,
				Marks: tt.wantMarks, Synced: tt.wantSynced, DataEnd: tt.wantFinal}
			if diff := cmp.Diff(want, sealed); diff != "" {
				t.Errorf("SegmentInfo after SealTail (-want +got):\n%s", diff)
			}
		})
	}
}

// recordsEnd returns the offset just past data records holding ps, written
// after the segment header record.
func recordsEnd(ps [][]byte) int64 {
	end := int64(segHeaderRec)
	for _, p := range ps {
		end += recHeaderSize + int64(len(p))
	}
	return end
}

// appendBytes appends b to segment seg, without syncing.
func appendBytes(tb testing.TB, fsys vfs.FS, seg wal.SegmentNum, b []byte) {
	tb.Helper()
	f, err := fsys.OpenReadWrite(wal.SegmentPath(testDir, seg))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteAt(b, fi.Size()); err != nil {
		tb.Fatal(err)
	}
}

// syncDir makes the names in testDir durable.
func syncDir(tb testing.TB, fsys vfs.FS) {
	tb.Helper()
	if err := vfs.SyncDir(fsys, testDir); err != nil {
		tb.Fatal(err)
	}
}

// TestWriterPreallocate: the writer reserves whole steps just ahead of its
// records, and writes every byte of them (zeros past the records), so that
// no sync has to convert a reserved but unwritten extent.
func TestWriterPreallocate(t *testing.T) {
	const step = 1024
	fsys := newFS(t)
	var written []bool // per byte of the segment: some write covered it
	watch := &vfs.Inject{FS: fsys, Rule: func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite {
			for int64(len(written)) < op.Off+op.Len {
				written = append(written, false)
			}
			for i := op.Off; i < op.Off+op.Len; i++ {
				written[i] = true
			}
		}
		return nil
	}}
	w, err := wal.Create(watch, testDir, 1, wal.Options{Preallocate: step})
	if err != nil {
		t.Fatal(err)
	}
	ps := payloads(24)
	for i, p := range ps {
		if _, err := w.Append(p); err != nil {
			t.Fatal(err)
		}
		size := int64(len(readSegment(t, fsys, 1)))
		if off := w.Offset(); size%step != 0 || size < off || size-off >= step {
			t.Fatalf("after record %d: file size %d with records up to %d; want whole %d-byte steps just covering them",
				i, size, off, step)
		}
		if at := slices.Index(written, false); at >= 0 || int64(len(written)) != size {
			t.Fatalf("after record %d: %d of the file's %d bytes written, the first gap at %d; want all of them",
				i, len(written), size, at)
		}
		if i%5 == 0 {
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, info, err := scanSegment(fsys.CrashClone(), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recordsFor(1, ps), got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if info.Torn || info.DataEnd != recordsEnd(ps) || info.Size <= info.End {
		t.Errorf("SegmentInfo %+v: want DataEnd %d, zeros after it, not torn", info, recordsEnd(ps))
	}
}

// opLog wraps a file system and logs the data operations on the files it
// opens for writing.
type opLog struct {
	vfs.FS
	ops []string
}

func (l *opLog) OpenReadWrite(name string) (vfs.File, error) {
	f, err := l.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &opLogFile{File: f, l: l}, nil
}

type opLogFile struct {
	vfs.File
	l *opLog
}

func (f *opLogFile) WriteAt(p []byte, off int64) (int, error) {
	f.l.ops = append(f.l.ops, "write")
	return f.File.WriteAt(p, off)
}

func (f *opLogFile) Truncate(n int64) error {
	f.l.ops = append(f.l.ops, "truncate")
	return f.File.Truncate(n)
}

func (f *opLogFile) Sync() error {
	f.l.ops = append(f.l.ops, "sync")
	return f.File.Sync()
}

// TestSealTailOrder checks that SealTail makes its cut durable before it
// writes over the old tail. Were the seal written first, a crash could
// keep the seal and lose the cut (the two are independent until a sync),
// leaving the torn bytes after a seal: TestSealTailLostCut shows that the
// reader must call that corruption.
func TestSealTailOrder(t *testing.T) {
	tests := []struct {
		name   string
		prep   func(t *testing.T, fsys *vfs.MemFS)
		sealed bool
		want   []string
	}{
		{
			name: "torn tail",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				writeSynced(t, fsys, 1, payloads(3), wal.Options{}, false)
				torn := frame(typeData, saltOf(readSegment(t, fsys, 1)), 0, []byte("torn bytes of a lost write"))
				appendBytes(t, fsys, 1, torn[:30])
			},
			want: []string{"truncate", "sync", "write", "sync"},
		},
		{
			name: "torn header",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				f, err := fsys.Create(wal.SegmentPath(testDir, 1))
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt(frame(typeHeader, 7, 0, headerPayload("KVWL", 2, 1, 7))[:20], 0)
				f.Close()
			},
			want: []string{"truncate", "sync", "write", "write", "sync"},
		},
		{
			// Nothing claims the seal synced: it is written again, in
			// case it sits in pages a failed fdatasync left clean, and
			// synced before the next segment exists; the zeros after it
			// go after.
			name: "already sealed: the seal rewritten",
			prep: func(t *testing.T, fsys *vfs.MemFS) {
				writeSynced(t, fsys, 1, payloads(3), wal.Options{Preallocate: 4096}, true)
			},
			sealed: true,
			want:   []string{"write", "sync", "truncate", "sync"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := newFS(t)
			tt.prep(t, mem)
			_, info, err := scanSegment(mem, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			if info.Sealed != tt.sealed {
				t.Fatalf("fixture: Sealed=%v, want %v", info.Sealed, tt.sealed)
			}
			l := &opLog{FS: mem}
			if err := wal.SealTail(l, testDir, info, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, l.ops); diff != "" {
				t.Errorf("operations on the segment (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSealTailLostCut builds the state a crash in SealTail would leave if
// the seal could become durable without the cut before it: the newest
// segment's records, a seal, and then the rest of the torn tail. The
// reader cannot tell this from damage, so SealTail must not allow it.
func TestSealTailLostCut(t *testing.T) {
	fsys := newFS(t)
	ps := payloads(3)
	writeSynced(t, fsys, 1, ps, wal.Options{}, false)
	end := recordsEnd(ps)
	appendBytes(t, fsys, 1, bytes.Repeat([]byte{0xee}, 100)) // the torn tail
	b := readSegment(t, fsys, 1)
	copy(b[end:], frame(typeSeal, saltOf(b), 0, nil))
	_, _, err := scanSegment(memWithSegment(t, 1, b), 1, true)
	if err := checkCorrupt(err, wal.ErrCorrupt, wal.SegmentPath(testDir, 1), end+recHeaderSize); err != nil {
		t.Error(err)
	}
}

// TestScanToAppend checks that the file ScanToAppend returns serves
// OpenAppendFile as a new open serves OpenAppend: a record appended
// through it follows the ones scanned. A segment ScanToAppend finds
// damaged comes back with no file.
func TestScanToAppend(t *testing.T) {
	fsys := newFS(t)
	w, err := wal.Create(fsys, testDir, 1, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := payloads(3)
	if _, err := w.Append(ps[0], ps[1]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd := &wal.Reader{FS: fsys, Dir: testDir}
	var seen int
	info, f, err := rd.ScanToAppend(1, func(wal.Record) error { seen++; return nil })
	if err != nil || f == nil || seen != 2 {
		t.Fatalf("ScanToAppend: %d records, file %v, %v", seen, f, err)
	}
	w, err = wal.OpenAppendFile(fsys, testDir, info, wal.Options{}, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ps[2]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := scanSegment(fsys, 1, true)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2].Payload, ps[2]) {
		t.Fatalf("after an append through ScanToAppend's file: %d records, %v", len(got), err)
	}

	// A byte of the first record's payload changed: corruption.
	g, err := fsys.OpenReadWrite(wal.SegmentPath(testDir, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte{0xff}, segHeaderRec+recHeaderSize); err != nil {
		t.Fatal(err)
	}
	g.Close()
	_, f, err = rd.ScanToAppend(1, nil)
	if !errors.Is(err, wal.ErrCorrupt) || f != nil {
		t.Errorf("ScanToAppend of a damaged segment: file %v, %v; want no file and ErrCorrupt", f, err)
	}
}
