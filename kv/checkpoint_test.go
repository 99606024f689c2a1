package kv_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestCheckpointCoversItsRotation: a background checkpoint records as
// covered the segment its own rotation sealed, and deletes only the
// segments up to it, however many rotations happen while it writes the
// snapshot. The checkpoint's snapshot write is held (hook FS) while
// writes fill segment after segment; then it is released. Deterministic:
// the rotations happen while the snapshot is held, every time.
func TestCheckpointCoversItsRotation(t *testing.T) {
	mem := vfs.NewMem()
	h := &hookFS{FS: mem}
	opts := kv.Options{FS: h, SegmentSize: 2 << 10, CheckpointBytes: -1, NoPreallocate: true, LogRetention: -1}
	s, _ := memStore(t, &opts)
	want := map[string]string{}
	put := func(i int) {
		t.Helper()
		k, v := fmt.Sprintf("k%03d", i%50), fmt.Sprintf("%03d:%s", i, strings.Repeat("v", 200))
		if _, err := s.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := range 40 {
		put(i)
	}
	sealed := s.Stats().Segment // the checkpoint's rotation seals this one
	if sealed < 3 {
		t.Fatalf("only %d segments before the checkpoint", sealed)
	}

	var once sync.Once
	entered, release := make(chan struct{}), make(chan struct{})
	h.setWrite(func(name string) error {
		if strings.HasSuffix(name, "/snapshot.tmp") {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- s.Checkpoint() }()
	<-entered // rotated, and writing the snapshot

	// Rotations racing the checkpoint: several segments fill meanwhile.
	for i := 40; s.Stats().Segment < sealed+4; i++ {
		put(i)
		if i > 1000 {
			t.Fatal("the log does not rotate")
		}
	}
	last := s.Stats().Segment
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}

	meta, err := readMeta(mem, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if meta.Covered != sealed {
		t.Errorf("the snapshot covers %s, want %s: the segment the checkpoint's rotation sealed (the log is at %s)",
			meta.Covered, sealed, last)
	}
	segs, err := wal.ListSegments(mem, "/data")
	if err != nil {
		t.Fatal(err)
	}
	var wantSegs []wal.SegmentNum
	for n := sealed + 1; n <= last; n++ {
		wantSegs = append(wantSegs, n)
	}
	if diff := cmp.Diff(wantSegs, segs); diff != "" {
		t.Errorf("segments after the checkpoint (-want +got): every one it covered deleted, none other\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, fsys := range map[string]vfs.FS{"reopen": mem, "power loss": mem.CrashClone()} {
		r := reopen(t, fsys, kv.Options{SegmentSize: 2 << 10, CheckpointBytes: -1})
		if diff := cmp.Diff(want, dumpStore(r)); diff != "" {
			t.Errorf("%s: map (-want +got):\n%s", name, diff)
		}
	}
}
