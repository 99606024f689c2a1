package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestOpenCheckpointPolicy: an open that replayed a log small beside the
// snapshot leaves the files as they are (a checkpoint would rewrite the
// whole snapshot for it), and the replayed bytes count towards the next
// checkpoint; an open that replayed a log as big as a quarter of the
// snapshot checkpoints it in the background, so the next open replays
// nothing. Both keep every write.
func TestOpenCheckpointPolicy(t *testing.T) {
	fsys := vfs.NewMem()
	opts := kv.Options{FS: fsys}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	put := func(s *kv.Store, k, v string) {
		t.Helper()
		if _, err := s.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := range 400 {
		put(s, fmt.Sprintf("key%04d", i), fmt.Sprintf("value %d of a snapshot worth keeping", i))
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	put(s, "small", "a log small beside the snapshot")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		names, err := fsys.List("/data")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		return names
	}
	check := func(s *kv.Store) {
		t.Helper()
		for k, v := range want {
			e, err := s.Get([]byte(k))
			if err != nil || string(e.Value) != v {
				t.Fatalf("Get(%q) = %q, %v; want %q", k, e.Value, err, v)
			}
		}
		if s.Len() != len(want) {
			t.Fatalf("%d keys, want %d", s.Len(), len(want))
		}
	}

	before := files()
	snap, _ := vfs.ReadFile(fsys, "/data/snapshot")
	for range 2 {
		s, err = kv.Open("/data", &opts)
		if err != nil {
			t.Fatal(err)
		}
		check(s)
		st := s.Stats()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if st.RecoveryReplayed != 1 || st.Checkpoints != 0 {
			t.Errorf("small log: replayed %d records, %d checkpoints; want 1 and 0", st.RecoveryReplayed, st.Checkpoints)
		}
	}
	after, _ := vfs.ReadFile(fsys, "/data/snapshot")
	if !slices.Equal(before, files()) || string(snap) != string(after) {
		t.Errorf("opens that replayed a small log changed the files: %v -> %v (snapshot rewritten: %v)",
			before, files(), string(snap) != string(after))
	}

	// A log a quarter of the snapshot's size or more.
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		put(s, fmt.Sprintf("key%04d", i), fmt.Sprintf("value %d, changed after the checkpoint", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	if err := s.Close(); err != nil { // waits for the background checkpoint
		t.Fatal(err)
	}
	if st := s.Stats(); st.RecoveryReplayed != 201 || st.Checkpoints != 1 {
		t.Errorf("big log: replayed %d records, %d checkpoints; want 201 and 1", st.RecoveryReplayed, st.Checkpoints)
	}
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	if st := s.Stats(); st.RecoveryReplayed != 0 {
		t.Errorf("after the open's checkpoint: replayed %d records, want 0", st.RecoveryReplayed)
	}
	s.Close()
}
