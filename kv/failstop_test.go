package kv_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestFailedSyncFailsGroup fails the fdatasync of a group commit of three
// writes: every waiter of that group gets ErrFailed wrapping the cause, so
// does every later write, Sync and Checkpoint, even once syncs succeed
// again; the log is never synced again (a retry could "succeed" over pages
// the kernel dropped); none of the group's writes becomes visible; and a
// reopen after a power loss holds exactly the writes acknowledged before.
func TestFailedSyncFailsGroup(t *testing.T) {
	for _, p := range failedSyncGroup(t, variant.None) {
		t.Error(p)
	}
}

// TestFailedSyncCatchesRetry runs the same checks on the retry-fsync
// variant, which retries the failed fdatasync: they must fail.
func TestFailedSyncCatchesRetry(t *testing.T) {
	problems := failedSyncGroup(t, variant.RetrySync)
	if len(problems) == 0 {
		t.Fatal("the retry-fsync variant passed the failed-sync checks")
	}
	t.Logf("retry-fsync caught: %s", strings.Join(problems, "; "))
}

// failedSyncGroup runs the scenario of TestFailedSyncFailsGroup and
// returns what went wrong.
func failedSyncGroup(t *testing.T, bug variant.Bug) (problems []string) {
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	mem := vfs.NewMem()
	h := &hookFS{FS: mem}
	s, _ := memStore(t, &kv.Options{FS: variant.Wrap(h, bug)})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}

	// Hold the sync of write X, so that B, C and D queue behind it and
	// form the next group; then fail that group's sync.
	var mu sync.Mutex
	logSyncs := 0
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h.setSync(func(name string) error {
		if !strings.Contains(name, "log.") {
			return nil
		}
		mu.Lock()
		logSyncs++
		n := logSyncs
		mu.Unlock()
		switch n {
		case 1: // X's group
			entered <- struct{}{}
			<-release
			return nil
		case 2: // the group of B, C and D
			return &os.PathError{Op: "fdatasync", Path: name, Err: syscall.EIO}
		}
		return nil // later syncs would succeed: none may happen
	})
	x := s.Submit(kv.PutOp([]byte("x"), []byte("X")))
	<-entered
	group := []*kv.Pending{
		s.Submit(kv.AddOp([]byte("b"), 1)),
		s.Submit(kv.PutOp([]byte("c"), []byte("C"))),
		s.Submit(kv.DeleteOp([]byte("a"))),
	}
	close(release)
	if _, _, err := x.Wait(); err != nil {
		t.Fatalf("X: %v", err)
	}
	for i, p := range group {
		_, _, err := p.Wait()
		if !errors.Is(err, kv.ErrFailed) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "/data/log.000001") {
			errorf("waiter %d of the failed group: %v, want ErrFailed wrapping the EIO of log.000001", i, err)
		}
	}
	mu.Lock()
	if logSyncs != 2 {
		errorf("%d log syncs, want 2: the three writes share one group commit", logSyncs)
	}
	mu.Unlock()

	// Syncs succeed from now on; the store still refuses.
	if _, err := s.Put([]byte("later"), []byte("v")); !errors.Is(err, kv.ErrFailed) || !errors.Is(err, syscall.EIO) {
		errorf("a later Put: %v, want ErrFailed wrapping the cause", err)
	}
	if _, _, err := s.Submit(kv.AddOp([]byte("b"), 1)).Wait(); !errors.Is(err, kv.ErrFailed) {
		errorf("a later Submit: %v, want ErrFailed", err)
	}
	if err := s.Sync(); !errors.Is(err, kv.ErrFailed) {
		errorf("Sync: %v, want ErrFailed", err)
	}
	if err := s.Checkpoint(); !errors.Is(err, kv.ErrFailed) {
		errorf("Checkpoint: %v, want ErrFailed", err)
	}
	mu.Lock()
	if logSyncs != 2 {
		errorf("the log was synced %d more times after the failure: a failed fsync must never be retried", logSyncs-2)
	}
	mu.Unlock()
	want := map[string]string{"a": "1", "x": "X"}
	if got := dumpStore(s); !mapsEqual(got, want) {
		errorf("visible after the failed group: %v, want %v (nothing that depended on the failed sync)", got, want)
	}
	if s.Revision() != 2 {
		errorf("revision %d, want 2", s.Revision())
	}
	if err := s.Close(); err != nil {
		errorf("Close after a fail-stop: %v (the failure was reported to the writes)", err)
	}

	// A failed write's outcome is unknown, not "not written": its bytes
	// were written to the log before the failed sync, and a kernel may have
	// carried them to the disk all the same. So after a power loss or a
	// process crash, recovery may replay the whole group (one record each,
	// in order), or none of it; never a part out of order, and never
	// anything acknowledged missing.
	withGroup := map[string]string{"x": "X", "b": "1", "c": "C"}
	r := reopen(t, mem.CrashClone(), kv.Options{})
	if got := dumpStore(r); !mapsEqual(got, want) && !mapsEqual(got, withGroup) {
		errorf("after a power loss: %v, want %v or %v", got, want, withGroup)
	}
	r.Close()
	p := reopen(t, mem.Clone(), kv.Options{})
	got := dumpStore(p)
	if !mapsEqual(got, want) && !mapsEqual(got, withGroup) {
		errorf("after a process crash: %v, want %v or %v", got, want, withGroup)
	}
	return problems
}

// TestFailedGroupFailsEveryRequest fails a group whose requests include
// refusals computed against the group's own earlier requests: a fenced
// write on a key the group created, a Delete of a key the group deleted,
// an Add on a key the group set to a non-integer. Those earlier requests'
// records were in the failed append or sync, so their outcome is unknown
// and the refusals may describe a state that never existed: every request
// of the group must get ErrFailed wrapping the cause, with a zero result,
// and none of the sentinels its evaluation gave.
func TestFailedGroupFailsEveryRequest(t *testing.T) {
	tests := []struct {
		name string
		// failSync fails the group's fdatasync; otherwise its write.
		failSync bool
	}{
		{name: "sync fails", failSync: true},
		{name: "append fails", failSync: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { failedGroupOwnErrors(t, tc.failSync) })
	}
}

// outcome is what a write of TestFailedGroupFailsEveryRequest returned.
type outcome struct {
	Rev   kv.Revision
	Added int64
	Res   kv.TxnResult
	err   error
}

func failedGroupOwnErrors(t *testing.T, failSync bool) {
	h := &hookFS{FS: vfs.NewMem()}
	s, _ := memStore(t, &kv.Options{FS: h})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	// Hold the sync of write X, so that the writes below queue behind it
	// and form the next group; then fail that group.
	var armed atomic.Bool
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var held atomic.Bool
	h.setSync(func(name string) error {
		if !strings.Contains(name, "log.") {
			return nil
		}
		if armed.Load() {
			if failSync {
				return &os.PathError{Op: "fdatasync", Path: name, Err: syscall.EIO}
			}
			return nil
		}
		if held.CompareAndSwap(false, true) {
			entered <- struct{}{}
			<-release
		}
		return nil
	})
	if !failSync {
		h.setWrite(func(name string) error {
			if armed.Load() && strings.Contains(name, "log.") {
				return &os.PathError{Op: "write", Path: name, Err: syscall.EIO}
			}
			return nil
		})
	}
	x := s.Submit(kv.PutOp([]byte("x"), []byte("X")))
	<-entered

	fence := kv.Fence{Key: []byte("L"), Token: 12345}
	steps := []struct {
		name string
		run  func() outcome
		// would is the error the write gets from its evaluation against
		// the group's earlier writes, which must not reach the writer.
		would error
	}{
		{name: "put L (creates the fence key)", run: func() outcome {
			rev, added, err := s.Submit(kv.PutOp([]byte("L"), []byte("holder"))).Wait()
			return outcome{Rev: rev, Added: added, err: err}
		}},
		{name: "fenced put on L, wrong token", would: kv.ErrFenced, run: func() outcome {
			rev, err := s.Fenced(fence).Put([]byte("f"), []byte("v"))
			return outcome{Rev: rev, err: err}
		}},
		{name: "delete a (in the group)", run: func() outcome {
			rev, added, err := s.Submit(kv.DeleteOp([]byte("a"))).Wait()
			return outcome{Rev: rev, Added: added, err: err}
		}},
		{name: "Delete a again", would: kv.ErrNotFound, run: func() outcome {
			rev, err := s.Delete([]byte("a"))
			return outcome{Rev: rev, err: err}
		}},
		{name: "put n to a non-integer", run: func() outcome {
			rev, added, err := s.Submit(kv.PutOp([]byte("n"), []byte("seven"))).Wait()
			return outcome{Rev: rev, Added: added, err: err}
		}},
		{name: "Add on n", would: kv.ErrNotInteger, run: func() outcome {
			added, rev, err := s.Add([]byte("n"), 1)
			return outcome{Rev: rev, Added: added, err: err}
		}},
		{name: "put m to the largest int64", run: func() outcome {
			rev, added, err := s.Submit(kv.PutOp([]byte("m"), []byte("9223372036854775807"))).Wait()
			return outcome{Rev: rev, Added: added, err: err}
		}},
		{name: "Add on m", would: kv.ErrOverflow, run: func() outcome {
			added, rev, err := s.Add([]byte("m"), 1)
			return outcome{Rev: rev, Added: added, err: err}
		}},
		{name: "Txn on L (would succeed)", run: func() outcome {
			res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Exists([]byte("L"))}, Then: []kv.Op{kv.PutOp([]byte("t"), []byte("y"))}})
			return outcome{Res: res, err: err}
		}},
		{name: "Add on b (would succeed)", run: func() outcome {
			added, rev, err := s.Add([]byte("b"), 5)
			return outcome{Rev: rev, Added: added, err: err}
		}},
	}
	outs := make([]chan outcome, len(steps))
	for i, st := range steps {
		outs[i] = make(chan outcome, 1)
		go func() { outs[i] <- st.run() }()
		// Queue the writes in order: each is in the committer's queue
		// before the next starts.
		deadline := time.Now().Add(10 * time.Second)
		for kv.Queued(s) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("step %q never queued", st.name)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	armed.Store(true)
	close(release)
	if _, _, err := x.Wait(); err != nil {
		t.Fatalf("X: %v", err)
	}
	for i, st := range steps {
		got := <-outs[i]
		if !errors.Is(got.err, kv.ErrFailed) || !errors.Is(got.err, syscall.EIO) {
			t.Errorf("%s: %v, want ErrFailed wrapping the EIO", st.name, got.err)
		}
		if st.would != nil && errors.Is(got.err, st.would) {
			t.Errorf("%s: %v matches %v, computed against the failed group's own writes", st.name, got.err, st.would)
		}
		for _, sentinel := range []error{kv.ErrFenced, kv.ErrNotFound, kv.ErrNotInteger, kv.ErrOverflow} {
			if st.would == nil && errors.Is(got.err, sentinel) {
				t.Errorf("%s: %v matches %v", st.name, got.err, sentinel)
			}
		}
		got.err = nil
		if d := cmp.Diff(outcome{}, got, cmp.AllowUnexported(outcome{})); d != "" {
			t.Errorf("%s: result of a failed write (-want +got):\n%s", st.name, d)
		}
	}
	if got, want := dumpStore(s), map[string]string{"a": "1", "x": "X"}; !mapsEqual(got, want) {
		t.Errorf("visible after the failed group: %v, want %v", got, want)
	}
}

// TestStatsFailedAtFailure: Stats().Failed (and Err) report a failed
// sync or write of the log as soon as it has failed, wherever it failed:
// in a group commit, in the background sync of Interval, in Sync, in
// the rotation of a checkpoint or of a full segment, in the mark an idle
// writer writes. No later write is needed for the store to know it has
// failed; a caller watching Stats sees it with nothing written.
func TestStatsFailedAtFailure(t *testing.T) {
	eio := &os.PathError{Op: "fdatasync", Path: "log", Err: syscall.EIO}
	tests := []struct {
		name string
		opts kv.Options
		// write: the hook fails writes of the log rather than syncs.
		write bool
		// trigger makes the store sync (or write) the log once the hook
		// is armed, and returns the error its caller got, if any.
		trigger func(s *kv.Store) error
	}{
		{name: "group commit", trigger: func(s *kv.Store) error {
			_, err := s.Put([]byte("k"), []byte("v"))
			return err
		}},
		{name: "interval sync", opts: kv.Options{Sync: kv.Interval(time.Millisecond)}, trigger: func(s *kv.Store) error {
			_, err := s.Put([]byte("k"), []byte("v")) // acknowledged before the sync fails
			return err
		}},
		{name: "Sync", opts: kv.Options{Sync: kv.Never}, trigger: func(s *kv.Store) error {
			if _, err := s.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			return s.Sync()
		}},
		{name: "checkpoint rotation", opts: kv.Options{CheckpointBytes: -1}, trigger: func(s *kv.Store) error {
			return s.Checkpoint()
		}},
		{name: "full segment rotation", opts: kv.Options{SegmentSize: 1 << 10, Sync: kv.Never}, trigger: func(s *kv.Store) error {
			// Under Never only the rotation syncs: the second write finds
			// the segment full and seals it.
			if _, err := s.Put([]byte("k"), make([]byte, 2<<10)); err != nil {
				return err
			}
			_, err := s.Put([]byte("k2"), []byte("v"))
			return err
		}},
		{name: "idle mark", write: true, trigger: func(s *kv.Store) error {
			// The mark is written a millisecond after this write.
			_, err := s.Put([]byte("k"), []byte("v"))
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &hookFS{FS: vfs.NewMem()}
			o := tc.opts
			o.FS = h
			s, _ := memStore(t, &o)
			if _, err := s.Put([]byte("before"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			var failed atomic.Int32
			hook := func(name string) error {
				if strings.Contains(name, "log.") {
					failed.Add(1)
					return eio
				}
				return nil
			}
			if tc.write {
				// Fail the log's writes from the trigger's sync on: its
				// record is written, and the next write of the log is the
				// mark an idle writer writes.
				var armed atomic.Bool
				h.setSync(func(name string) error {
					armed.Store(armed.Load() || strings.Contains(name, "log."))
					return nil
				})
				h.setWrite(func(name string) error {
					if armed.Load() {
						return hook(name)
					}
					return nil
				})
			} else {
				h.setSync(hook)
			}
			err := tc.trigger(s)
			// Wait for the failure, without writing anything.
			deadline := time.Now().Add(10 * time.Second)
			for failed.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the log was never synced or written (trigger: %v)", err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			if err != nil && !errors.Is(err, kv.ErrFailed) && !errors.Is(err, syscall.EIO) {
				t.Errorf("the trigger's caller got %v, want ErrFailed or the EIO", err)
			}
			// The committer records the failure right after the call
			// returns; allow it that long, with no write meanwhile.
			for s.Stats().Failed == nil {
				if time.Now().After(deadline) {
					t.Fatalf("Stats().Failed still nil after the failed %s (caller got %v)", tc.name, err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			if got := s.Stats().Failed; !errors.Is(got, syscall.EIO) {
				t.Errorf("Stats().Failed = %v, want the EIO", got)
			}
			if err := s.Err(); !errors.Is(err, kv.ErrFailed) || !errors.Is(err, syscall.EIO) {
				t.Errorf("Err() = %v, want ErrFailed wrapping the EIO", err)
			}
			if _, err := s.Put([]byte("after"), []byte("v")); !errors.Is(err, kv.ErrFailed) {
				t.Errorf("a Put after the failure: %v, want ErrFailed", err)
			}
		})
	}
}
