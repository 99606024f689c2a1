package kv_test

import (
	"errors"
	"fmt"
	"path"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestDeletedNewestSegmentRefused is the finding: deleting the
// newest segment took 432 acknowledged writes with it and check said ok.
// A sealed segment is never the newest (the rotation creates the next one
// durably before it seals), so the deletion shows: Open and Check refuse
// the directory with a typed error naming the missing segment, and a
// repair's skip passes the revisions the segment may have held.
func TestDeletedNewestSegmentRefused(t *testing.T) {
	for _, writes := range []int{432, 40} {
		t.Run(fmt.Sprint(writes), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := kv.Options{FS: mem, SegmentSize: 4 << 10, CheckpointBytes: 16 << 10}
			s, err := kv.Open("/data", &opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range writes {
				if _, err := s.Put([]byte(fmt.Sprintf("k%03d", i%50)), []byte(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			rev := s.Revision()
			newest := s.Stats().Segment
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			name := wal.SegmentPath("/data", newest)
			if err := mem.Remove(name); err != nil {
				t.Fatal(err)
			}
			before := dirFiles(t, mem, "/data")
			_, err = kv.Open("/data", &opts)
			var ce *wal.CorruptError
			if !errors.As(err, &ce) || !recovery.IsCorrupt(err) || ce.File != name {
				t.Fatalf("open: %v, want corruption naming %s", err, name)
			}
			if d := diffFiles(before, dirFiles(t, mem, "/data")); d != "" {
				t.Fatalf("the refused open changed files: %s", d)
			}
			rep, err := recovery.Check(mem, "/data")
			if err != nil || rep.Clean() {
				t.Fatalf("check: %v, problems %v", err, rep.Problems)
			}
			plan, err := recovery.PlanRepair(mem, "/data")
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Apply(mem, nil); err != nil {
				t.Fatal(err)
			}
			s, err = kv.Open("/data", &opts)
			if err != nil {
				t.Fatalf("open after repair: %v", err)
			}
			defer s.Close()
			if s.Revision() <= rev {
				t.Errorf("revision %d after the repair, not past the %d the store had given", s.Revision(), rev)
			}
		})
	}
}

// TestRotationFullDisk: a full disk when the next segment is created
// fails the write, leaves no new segment, and the segment being rotated
// unsealed, so that a reopen after space is freed appends to it again.
func TestRotationFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	in := &vfs.Inject{FS: mem, Rule: func(op vfs.Op) error {
		if full.Load() && op.Kind == vfs.OpWrite && path.Base(op.Path) == "log.000002" {
			return syscall.ENOSPC
		}
		return nil
	}}
	opts := kv.Options{FS: in, SegmentSize: 1 << 10, CheckpointBytes: -1, NoPreallocate: true}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for i := 0; ; i++ {
		if s.Stats().Segment == 1 && i > 0 {
			full.Store(true)
		}
		if _, err := s.Put([]byte(fmt.Sprint("k", i)), make([]byte, 100)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write %d: %v", i, err)
			}
			break
		}
		acked = i + 1
		if i > 100 {
			t.Fatal("the disk never filled")
		}
	}
	s.Close()
	if names, _ := mem.List("/data"); len(names) != 3 { // KVSTORE, LOCK, log.000001
		t.Errorf("files after the failed rotation: %v", names)
	}
	full.Store(false)
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != acked {
		t.Errorf("%d keys after the reopen, %d acknowledged", s.Len(), acked)
	}
}

// TestDeletedMarkerAndNewestIsTheLimit documents what README's caveats
// say the marker cannot show: with the marker deleted too, the store
// follows the rules of stores made before it, where a sealed newest
// segment is a crash state, and the deletion of the newest segment goes
// unnoticed (the open writes the marker back).
func TestDeletedMarkerAndNewestIsTheLimit(t *testing.T) {
	mem := vfs.NewMem()
	opts := kv.Options{FS: mem, SegmentSize: 1 << 10, CheckpointBytes: -1}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := s.Put([]byte(fmt.Sprint("k", i)), make([]byte, 50)); err != nil {
			t.Fatal(err)
		}
	}
	newest := s.Stats().Segment
	s.Close()
	mem.Remove(wal.SegmentPath("/data", newest))
	mem.Remove(path.Join("/data", recovery.MarkerName))
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatalf("the limit changed (good news: update README's caveat): %v", err)
	}
	s.Close()
}
