package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestCloseCheckpoint: a Close after more than CloseCheckpointBytes of log
// writes a checkpoint, so the next open replays nothing; below the
// threshold, with the option negative, or with CheckpointBytes negative
// and the option 0, it writes none and the next open replays the log.
func TestCloseCheckpoint(t *testing.T) {
	value := bytes.Repeat([]byte{'v'}, 1000)
	const n = 300 // about 300 KB of log
	for _, tc := range []struct {
		name       string
		close      int64 // CloseCheckpointBytes
		checkpoint int64 // CheckpointBytes
		want       bool  // a checkpoint at Close
	}{
		{"over", 100 << 10, 0, true},
		{"under", 1 << 20, 0, false},
		{"default under 4 MiB", 0, 0, false},
		{"negative", -1, 0, false},
		{"checkpoints off", 0, -1, false},
		{"checkpoints off, asked", 100 << 10, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			opts := kv.Options{FS: fsys, CloseCheckpointBytes: tc.close, CheckpointBytes: tc.checkpoint, Sync: kv.Never}
			s, err := kv.Open("/d", &opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if _, err := s.Put(fmt.Appendf(nil, "k%04d", i), value); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Delete([]byte("k0007")); err != nil {
				t.Fatal(err)
			}
			want := dumpStore(s)
			before := s.Stats().Checkpoints
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = kv.Open("/d", &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			st := s.Stats()
			if got := st.RecoveryReplayed == 0 && st.RecoverySnapshot; got != tc.want {
				t.Errorf("before Close %d checkpoints; at reopen: snapshot %v, %d records replayed; want a checkpoint at Close: %v",
					before, st.RecoverySnapshot, st.RecoveryReplayed, tc.want)
			}
			if got := dumpStore(s); !mapsEqual(got, want) {
				t.Errorf("reopened map differs: %d keys, want %d", len(got), len(want))
			}
		})
	}
}

// TestCloseCheckpointFails: a checkpoint at Close that fails (the disk
// full as it writes the snapshot) fails nothing: Close returns nil and
// the next open replays every write from the log.
func TestCloseCheckpointFails(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	var refused atomic.Int64
	in := &vfs.Inject{FS: mem, Rule: func(op vfs.Op) error {
		if full.Load() && op.Kind == vfs.OpWrite && strings.Contains(op.Path, "snapshot") {
			refused.Add(1)
			return syscall.ENOSPC
		}
		return nil
	}}
	opts := kv.Options{FS: in, CloseCheckpointBytes: 10 << 10}
	s, err := kv.Open("/d", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := s.Put(fmt.Appendf(nil, "k%03d", i), bytes.Repeat([]byte{'x'}, 200)); err != nil {
			t.Fatal(err)
		}
	}
	want := dumpStore(s)
	full.Store(true)
	if err := s.Close(); err != nil {
		t.Fatalf("Close with a failing checkpoint: %v, want nil", err)
	}
	if refused.Load() == 0 {
		t.Fatal("the Close wrote no snapshot: the test tested nothing")
	}
	full.Store(false)
	s, err = kv.Open("/d", &kv.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Stats(); st.RecoveryReplayed != 100 {
		t.Errorf("replayed %d records, want all 100", st.RecoveryReplayed)
	}
	if got := dumpStore(s); !mapsEqual(got, want) {
		t.Errorf("reopened map differs: %d keys, want %d", len(got), len(want))
	}
	if errors.Is(s.Err(), kv.ErrFailed) {
		t.Errorf("store failed: %v", s.Err())
	}
}
