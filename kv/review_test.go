package kv_test

// The outside review's findings about durability, reproduced through the
// store's public API: each test failed before its fix.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// syncFS wraps a MemFS and lets a test hold or fail the fdatasync of log
// segments: fail fails it the way ext4 and XFS fail one (EIO, and the
// dirty pages marked clean: they read back in this boot, and no later
// sync writes them); hold blocks it until released.
type syncFS struct {
	*vfs.MemFS
	mu      sync.Mutex
	fail    bool
	hold    chan struct{} // closed to release a held sync
	entered chan struct{} // receives when a sync is held
}

func (s *syncFS) Create(name string) (vfs.File, error) {
	f, err := s.MemFS.Create(name)
	return s.wrap(name, f, err)
}

func (s *syncFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := s.MemFS.OpenReadWrite(name)
	return s.wrap(name, f, err)
}

func (s *syncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &syncFile{File: f, fs: s, name: name}, nil
}

type syncFile struct {
	vfs.File
	fs   *syncFS
	name string
}

func (f *syncFile) Sync() error {
	if !strings.Contains(path.Base(f.name), "log.") {
		return f.File.Sync()
	}
	f.fs.mu.Lock()
	fail, hold, entered := f.fs.fail, f.fs.hold, f.fs.entered
	f.fs.fail = false
	f.fs.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
	if fail {
		if err := f.fs.DropDirty(f.name); err != nil {
			return err
		}
		return &os.PathError{Op: "fdatasync", Path: f.name, Err: syscall.EIO}
	}
	return f.File.Sync()
}

// TestReviewReopenAfterFailedSync (finding 1): the fdatasync of write B
// fails and the kernel drops B's pages clean; the program reopens the
// store in the same boot, where B reads back, and writes C, acknowledged.
// After a power loss the store must open and hold C.
func TestReviewReopenAfterFailedSync(t *testing.T) {
	mem := vfs.NewMem()
	fsys := &syncFS{MemFS: mem}
	opts := &kv.Options{FS: fsys}
	s, err := kv.Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("a"), []byte("A")); err != nil {
		t.Fatal(err)
	}
	fsys.mu.Lock()
	fsys.fail = true
	fsys.mu.Unlock()
	if _, err := s.Put([]byte("b"), []byte("B")); err == nil {
		t.Fatal("the put whose sync failed was acknowledged")
	}
	s.Close()

	s, err = kv.Open("/data", opts) // the same boot
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("c"), []byte("C")); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone() // the power loss, right after C's ack
	s.Close()

	r, err := kv.Open("/data", &kv.Options{FS: crashed})
	if err != nil {
		t.Fatalf("open after the power loss: %v", err)
	}
	defer r.Close()
	if e, err := r.Get([]byte("c")); err != nil || string(e.Value) != "C" {
		t.Errorf("acknowledged write c after the power loss: %v %v", e, err)
	}
}

// TestReviewReadOnlySeesOnlyDurable (finding 2): a read-only open beside a
// writer whose group's fdatasync has not returned must not show that
// group: a power loss could take it back, and its revision would then
// name another write. After the writer crashed, a read-only open shows
// the group only once it made it durable itself: a power loss right
// after the read keeps it, at the revision read. Where the group's
// write-back failed before the crash (its pages clean in the cache but
// not on disk, which an fdatasync no longer writes), it is left out, and
// the open says why.
func TestReviewReadOnlySeesOnlyDurable(t *testing.T) {
	mem := vfs.NewMem()
	fsys := &syncFS{MemFS: mem}
	s, err := kv.Open("/data", &kv.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put([]byte("a"), []byte("durable")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil { // marks: readers see a
		t.Fatal(err)
	}
	release := make(chan struct{})
	fsys.mu.Lock()
	fsys.hold, fsys.entered = release, make(chan struct{}, 1)
	entered := fsys.entered
	fsys.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := s.Put([]byte("b"), []byte("in flight")); done <- err }()
	<-entered // b is written, its fdatasync has not returned

	crashed := mem.Clone() // the writer's process dies here
	lost := mem.Clone()    // and here, after a write-back of b that failed
	names, err := lost.List("/data")
	if err != nil {
		t.Fatal(err)
	}
	newest := ""
	for _, n := range names {
		if strings.HasPrefix(n, "log.") {
			newest = "/data/" + n
		}
	}
	if err := lost.DropDirty(newest); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		fs     *vfs.MemFS
		showsB bool
	}{
		{"beside the live writer", mem, false},
		{"after the writer crashed", crashed, true},
		{"after the writer crashed with b's write-back failed", lost, false},
	} {
		r, err := kv.Open("/data", &kv.Options{FS: tc.fs, ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: read-only open: %v", tc.name, err)
		}
		e, err := r.Get([]byte("b"))
		if shows := err == nil; shows != tc.showsB {
			t.Errorf("%s: a read-only open shows b: %v, want %v (%v)", tc.name, shows, tc.showsB, err)
		}
		if e, err := r.Get([]byte("a")); err != nil || string(e.Value) != "durable" {
			t.Errorf("%s: a read-only open does not show a, durable and marked: %v %v", tc.name, e, err)
		}
		st := r.Stats()
		r.Close()
		switch {
		case tc.showsB:
			// Shown only once durable: a power loss right after the
			// read keeps b, at the revision the read gave it.
			p, err := kv.Open("/data", &kv.Options{FS: tc.fs.CrashClone()})
			if err != nil {
				t.Fatalf("%s: open after a power loss: %v", tc.name, err)
			}
			if pe, err := p.Get([]byte("b")); err != nil || pe.ModRev != e.ModRev {
				t.Errorf("%s: b read at revision %d, after a power loss: %v %v", tc.name, e.ModRev, pe, err)
			}
			p.Close()
			if st.RecoveryVouched != 1 || st.RecoveryUnvouched != 0 {
				t.Errorf("%s: %d records vouched, %d left out; want 1 and 0", tc.name, st.RecoveryVouched, st.RecoveryUnvouched)
			}
		case tc.fs == lost:
			if st.RecoveryUnvouched != 1 || st.RecoveryWriter != 0 || !strings.Contains(st.RecoveryUnvouchedWhy, "differs at offset") {
				t.Errorf("%s: %d left out (writer %d), why %q; want 1, no writer, and the offset that differs",
					tc.name, st.RecoveryUnvouched, st.RecoveryWriter, st.RecoveryUnvouchedWhy)
			}
		}
	}
	fsys.mu.Lock()
	fsys.hold = nil
	fsys.mu.Unlock()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// raceFS runs hook once, after the at-th listing of the directory: a
// writer's checkpoint that lands between a reader's list and its opens.
type raceFS struct {
	vfs.FS
	mu    sync.Mutex
	lists int
	at    int
	hook  func()
}

func (r *raceFS) List(dir string) ([]string, error) {
	names, err := r.FS.List(dir)
	r.mu.Lock()
	r.lists++
	fire := r.lists == r.at
	r.mu.Unlock()
	if fire {
		r.hook()
	}
	return names, err
}

// TestReviewReadOnlyRacingCheckpoint (finding 3): a read-only open that
// lists the directory, after which a writer's checkpoint deletes a
// covered segment, must not call the healthy directory corrupt. The
// checkpoint lands after each of the reader's first listings in turn.
func TestReviewReadOnlyRacingCheckpoint(t *testing.T) {
	for at := 1; at <= 4; at++ {
		mem := vfs.NewMem()
		s, err := kv.Open("/data", &kv.Options{FS: mem, SegmentSize: 1024, CheckpointBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if _, err := s.Put([]byte{'k', byte('a' + i%26)}, bytes.Repeat([]byte("v"), 60)); err != nil {
				t.Fatal(err)
			}
			if i == 20 {
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		racer := &raceFS{FS: mem, at: at, hook: func() {
			if err := s.Checkpoint(); err != nil {
				t.Error(err)
			}
		}}
		r, err := kv.Open("/data", &kv.Options{FS: racer, ReadOnly: true})
		if err != nil {
			t.Errorf("read-only open, a checkpoint after its listing %d: %v", at, err)
		} else {
			if r.Len() != 26 {
				t.Errorf("read-only open, a checkpoint after its listing %d: %d keys, want 26", at, r.Len())
			}
			r.Close()
		}
		s.Close()
	}
}

// TestReviewValueForgesNoFrame (finding 4): a value holding a record frame
// valid for its segment (both as version 1 framed records, with the
// segment number a client can predict, and with the segment's own salt,
// read from the file: more than any client can know) and runs of zeros.
// A power loss loses the page holding that record's header while a later
// page of the same write survives: the store must open, cutting the
// record, not refuse the log.
func TestReviewValueForgesNoFrame(t *testing.T) {
	mem := vfs.NewMem()
	s, err := kv.Open("/data", &kv.Options{FS: mem, Sync: kv.Never})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("first"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	name := wal.SegmentPath("/data", 1)
	head, _ := vfs.ReadFile(mem, name)
	value := forgedFrames(head)
	for len(value) < 3*4096 {
		value = append(value, value...)
	}
	if _, err := s.Put([]byte("evil"), value); err != nil {
		t.Fatal(err)
	}
	b, _ := vfs.ReadFile(mem, name) // not synced (Never): no Close
	off := recordOffsetOf(t, mem, 2)
	page := off / 4096 * 4096
	clear(b[max(page, off) : page+4096]) // the page holding the record's header, lost
	crashed := vfs.NewMem()
	crashed.MkdirAll("/data", 0o755)
	for _, n := range []string{"log.000001"} {
		f, _ := crashed.Create("/data/" + n)
		f.WriteAt(b, 0)
		f.Sync()
		f.Close()
	}
	vfs.SyncDir(crashed, "/data")
	s.Close()
	r, err := kv.Open("/data", &kv.Options{FS: crashed})
	if err != nil {
		t.Fatalf("open after a lost page under a value holding frames: %v", err)
	}
	defer r.Close()
	if _, err := r.Get([]byte("first")); err != nil {
		t.Errorf("the durable write is gone: %v", err)
	}
}

// forgedFrames returns bytes that hold a record frame as a client would
// forge one: framed as format version 1 (CRC of bytes 4.., length, type
// 2, segment 1, synced offset far past any damage) and as format version
// 2 with the segment's salt (from head, the segment's first bytes), each
// followed by a kilobyte of zeros.
func forgedFrames(head []byte) []byte {
	payload := []byte("\x01forged")
	tab := crc32.MakeTable(crc32.Castagnoli)
	v1 := make([]byte, 24, 24+len(payload))
	binary.LittleEndian.PutUint32(v1[4:], uint32(len(payload)))
	v1[8] = 2
	binary.LittleEndian.PutUint32(v1[12:], 1)
	binary.LittleEndian.PutUint64(v1[16:], 1<<40)
	v1 = append(v1, payload...)
	binary.LittleEndian.PutUint32(v1, crc32.Update(0, tab, v1[4:]))
	out := append(slices.Clone(v1), make([]byte, 1024)...)
	if len(head) >= 48 && string(head[24:28]) == "KVWL" && head[28] == 2 {
		var salt [8]byte
		copy(salt[:], head[40:48])
		v2 := make([]byte, 24, 24+len(payload))
		v2[0] = 2
		binary.LittleEndian.PutUint32(v2[4:], uint32(len(payload)))
		binary.LittleEndian.PutUint64(v2[8:], 1<<40)
		binary.LittleEndian.PutUint32(v2[16:], crc32.Update(crc32.Update(0, tab, salt[:]), tab, v2[:16]))
		v2 = append(v2, payload...)
		binary.LittleEndian.PutUint32(v2[20:], crc32.Update(crc32.Update(crc32.Update(0, tab, salt[:]), tab, v2[:20]), tab, v2[24:]))
		out = append(append(out, v2...), make([]byte, 1024)...)
	}
	return out
}

// recordOffsetOf returns the offset of the n-th data record (from 1) of
// segment 1.
func recordOffsetOf(t *testing.T, fsys vfs.FS, n int) int64 {
	t.Helper()
	rd := &wal.Reader{FS: fsys, Dir: "/data"}
	var off int64
	i := 0
	if _, err := rd.Scan(1, true, func(r wal.Record) error {
		if i++; i == n {
			off = r.Offset
		}
		return nil
	}); err != nil || off == 0 {
		t.Fatalf("record %d of segment 1: %v", n, err)
	}
	return off
}

// TestReviewBitRotRefused (finding 5): bytes altered in acknowledged
// records must be refused, not cut as a torn tail: in the last record of
// a log without preallocation, and in a record whose value holds a
// kilobyte of zeros followed by another acknowledged record of its group.
// The power loss comes right after the acknowledgement, before anything
// later could vouch for the records.
func TestReviewBitRotRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   kv.Options
		values [][]byte
		damage int // the record (from 1) to alter
	}{
		{"the last record, no preallocation", kv.Options{NoPreallocate: true},
			[][]byte{[]byte("one"), bytes.Repeat([]byte("v"), 600)}, 2},
		{"a value of zeros, then another acknowledged record", kv.Options{},
			[][]byte{append([]byte("x"), make([]byte, 1024)...), []byte("next")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			o := tc.opts
			o.FS = mem
			s, err := kv.Open("/data", &o)
			if err != nil {
				t.Fatal(err)
			}
			var ps []*kv.Pending
			for i, v := range tc.values {
				ps = append(ps, s.Submit(kv.PutOp([]byte{'k', byte('0' + i)}, v)))
			}
			for _, p := range ps {
				if _, _, err := p.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			crashed := mem.CrashClone() // right after the acks
			s.Close()
			off := recordOffsetOf(t, crashed, tc.damage)
			name := wal.SegmentPath("/data", 1)
			b, _ := vfs.ReadFile(crashed, name)
			b[off+40] ^= 0x20
			f, _ := crashed.OpenReadWrite(name)
			f.WriteAt(b, 0)
			f.Sync()
			f.Close()
			r, err := kv.Open("/data", &kv.Options{FS: crashed})
			if err == nil {
				n := r.Len()
				r.Close()
				t.Fatalf("bit rot in acknowledged record %d was cut as a torn tail (%d keys left), want a refusal", tc.damage, n)
			}
			if !recovery.IsCorrupt(err) {
				t.Errorf("open: %v, want corruption", err)
			}
		})
	}
}
