package kv_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// TestFailedSyncFailsGroup fails the fdatasync of a group commit of three
// writes: every waiter of that group gets ErrFailed wrapping the cause, so
// does every later write, Sync and Checkpoint, even once syncs succeed
// again; the log is never synced again (a retry could "succeed" over pages
// the kernel dropped); none of the group's writes becomes visible; and a
// reopen after a power loss holds exactly the writes acknowledged before.
func TestFailedSyncFailsGroup(t *testing.T) {
	for _, p := range failedSyncGroup(t, recovery.NoBug) {
		t.Error(p)
	}
}

// TestFailedSyncCatchesRetry runs the same checks on the retry-fsync
// variant, which retries the failed fdatasync: they must fail.
func TestFailedSyncCatchesRetry(t *testing.T) {
	problems := failedSyncGroup(t, recovery.BugRetrySync)
	if len(problems) == 0 {
		t.Fatal("the retry-fsync variant passed the failed-sync checks")
	}
	t.Logf("retry-fsync caught: %s", strings.Join(problems, "; "))
}

// failedSyncGroup runs the scenario of TestFailedSyncFailsGroup and
// returns what went wrong.
func failedSyncGroup(t *testing.T, bug recovery.Bug) (problems []string) {
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	mem := vfs.NewMem()
	h := &hookFS{FS: mem}
	s, _ := memStore(t, &kv.Options{FS: h, Bug: bug})
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
