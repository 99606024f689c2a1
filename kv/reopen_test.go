package kv_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestOpenCheckpointPolicy: an open that replayed a log shorter than
// CheckpointBytes leaves the files as they are (a checkpoint would
// rewrite the whole snapshot and start a segment for it, at every open of
// a short-lived process), even a log as big as the snapshot, and the
// replayed bytes count towards the next checkpoint; an open that replayed
// CheckpointBytes of log checkpoints it in the background, so the next
// open replays nothing. Both keep every write.
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

	// A log as big as the snapshot, shorter than CheckpointBytes: still
	// no checkpoint at open.
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
	if st := s.Stats(); st.RecoveryReplayed != 201 || st.Checkpoints != 0 {
		t.Errorf("a log shorter than CheckpointBytes: replayed %d records, %d checkpoints; want 201 and 0", st.RecoveryReplayed, st.Checkpoints)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if meta, _ := readMeta(fsys, "/data"); meta.Revision != 400 {
		t.Errorf("a log shorter than CheckpointBytes: the open wrote a snapshot at revision %d", meta.Revision)
	}

	// CheckpointBytes of log replayed: the open checkpoints it.
	opts.CheckpointBytes = 8 << 10
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	st, rev := s.Stats(), s.Revision()
	if err := s.Close(); err != nil { // waits for the background checkpoint
		t.Fatal(err)
	}
	if st.RecoveryReplayed != 201 {
		t.Errorf("big log: replayed %d records, want 201", st.RecoveryReplayed)
	}
	// The open's checkpoint, which Close waited for, wrote a snapshot of
	// everything the open replayed.
	if meta, err := readMeta(fsys, "/data"); err != nil || meta.Revision != rev {
		t.Errorf("big log: snapshot %+v, %v; want one at revision %d, by the open's checkpoint", meta, err, rev)
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

// TestUseWhileTreeBuilds opens a store big enough that its recovery
// builds the ordered tree in the background (record.Map.BuildAsync) and
// at once writes, deletes, checkpoints, reads and scans it, so that the
// race detector watches the build beside every path that touches the
// map; then it checks that a reopen finds every change (which it would
// not if the checkpoint's clone missed the changes made while the tree
// was pending).
func TestUseWhileTreeBuilds(t *testing.T) {
	const keys = 100_000 // past the size from which the tree is built in the background
	fsys := vfs.NewMem()
	opts := kv.Options{FS: fsys}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	reopen := func(s *kv.Store) *kv.Store {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := kv.Open("/data", &opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := map[string]string{}
	for b := 0; b < keys; b += 1000 {
		var ops []kv.Op
		for i := b; i < b+1000; i++ {
			k, v := fmt.Sprintf("key%06d", (i*7919)%keys), fmt.Sprint(i)
			ops = append(ops, kv.PutOp([]byte(k), []byte(v)))
			want[k] = v
		}
		if _, err := s.Txn(kv.Txn{Then: ops}); err != nil {
			t.Fatal(err)
		}
		if b == keys*9/10 {
			// A snapshot and a log to replay, too small for the reopen
			// to start with a checkpoint.
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	s = reopen(s)
	// Deletes, replacements and new keys, in one commit (one is quicker
	// than the build; many are not).
	var ops []kv.Op
	for i := range 100 {
		k := fmt.Sprintf("key%06d", i)
		ops = append(ops, kv.DeleteOp([]byte(k)))
		delete(want, k)
		k = fmt.Sprintf("key%06d", 100+i)
		ops = append(ops, kv.PutOp([]byte(k), []byte("replaced")))
		want[k] = "replaced"
		k = fmt.Sprintf("new%06d", i)
		ops = append(ops, kv.PutOp([]byte(k), []byte("new")))
		want[k] = "new"
	}
	if _, err := s.Txn(kv.Txn{Then: ops}); err != nil {
		t.Fatal(err)
	}
	// A checkpoint, which takes its clone of the map before the tree is
	// built, with the changes above still to go in.
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { // a scan, which waits for the tree
		n, prev := 0, ""
		for e := range s.Scan(nil, nil) {
			if k := string(e.Key); k <= prev {
				done <- fmt.Errorf("scan: %q after %q", k, prev)
				return
			} else {
				prev = k
			}
			n++
		}
		if n < keys-100 {
			done <- fmt.Errorf("scan saw %d keys, want at least %d", n, keys-100)
			return
		}
		done <- nil
	}()
	go func() { // reads of keys nobody changes
		for i := 200; i < 2000; i++ {
			k := fmt.Sprintf("key%06d", i)
			if e, err := s.Get([]byte(k)); err != nil || string(e.Value) != want[k] {
				done <- fmt.Errorf("Get(%q) = %q, %v; want %q", k, e.Value, err, want[k])
				return
			}
		}
		done <- nil
	}()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(s)
	defer s.Close()
	got := map[string]string{}
	for e := range s.Scan(nil, nil) {
		got[string(e.Key)] = string(e.Value)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("after reopen (-want +got):\n%s", diff)
	}
}

// TestReadingStartsNoCommitter: a store that is only read starts no
// committer (two goroutines, and a thread, that a short-lived reader
// would pay for at Open); the first write starts it, and a store with
// leases to expire starts it at Open.
func TestReadingStartsNoCommitter(t *testing.T) {
	s, fsys := memStore(t, nil)
	if _, err := s.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := reopen(t, fsys, kv.Options{})
	if _, err := r.Get([]byte("k")); err != nil {
		t.Fatal(err)
	}
	if kv.CommitterStarted(r) {
		t.Fatal("a store that was only read started its committer")
	}
	if _, err := r.Put([]byte("k2"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if !kv.CommitterStarted(r) {
		t.Fatal("a write did not start the committer")
	}
	id, err := r.Grant(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutLease([]byte("leased"), []byte("v"), id); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	l := reopen(t, fsys, kv.Options{})
	if !kv.CommitterStarted(l) {
		t.Fatal("a store with a lease to expire did not start its committer at Open")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A store closed without a write closes as one that wrote: its
	// data all there for the next open.
	if err := reopen(t, fsys, kv.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	got := dumpStore(reopen(t, fsys, kv.Options{}))
	if want := map[string]string{"k": "v", "k2": "v2", "leased": "v"}; !cmp.Equal(got, want) {
		t.Fatalf("after opens that only read, the store holds %v, want %v", got, want)
	}
}
