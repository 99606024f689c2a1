package filelock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/filelock/locktest"
	"github.com/kvstore/kv/kv"
)

// TestSuiteDir runs the acceptance suite on lockers that open the store
// for each operation (Open).
func TestSuiteDir(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locktest.Env {
		dir := filepath.Join(t.TempDir(), "data")
		if _, err := filelock.Open(dir); err != nil { // creates the store
			t.Fatal(err)
		}
		return locktest.Env{
			Backend: filelock.DirBackend(dir),
			New:     func(opts ...filelock.Option) (*filelock.Locker, error) { return filelock.Open(dir, opts...) },
			NewOn: func(b lockstore.Backend, opts ...filelock.Option) (*filelock.Locker, error) {
				return filelock.NewBackend(b, filepath.Join(dir, filelock.HolderDirName), opts...)
			},
			Kill: func(_ *filelock.Locker, h *filelock.Holder) { h.File().Close() },
		}
	})
}

// TestSuiteStore runs the acceptance suite on lockers of a store this
// process keeps open (New).
func TestSuiteStore(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locktest.Env {
		s, err := kv.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return locktest.Env{
			Backend: filelock.StoreBackend(s),
			New:     func(opts ...filelock.Option) (*filelock.Locker, error) { return filelock.New(s, opts...) },
			NewOn: func(b lockstore.Backend, opts ...filelock.Option) (*filelock.Locker, error) {
				return filelock.NewBackend(b, filepath.Join(s.Dir(), filelock.HolderDirName), opts...)
			},
			Kill: func(_ *filelock.Locker, h *filelock.Holder) { h.File().Close() },
		}
	})
}

// wrongBackends are deliberately broken backends: the suite must fail on
// each, in the subtest named.
var wrongBackends = map[string]struct {
	txn     func(lockstore.Txn) lockstore.Txn
	subtest string
}{
	// Drops the fence: a stale holder's writes commit.
	"ignores-fence": {func(t lockstore.Txn) lockstore.Txn { t.Fence = nil; return t }, "FencedWriter"},
	// A release by key name alone, as etcd's concurrency.Mutex.Unlock
	// does (etcd-io/etcd#22082).
	"delete-by-name": {func(t lockstore.Txn) lockstore.Txn {
		if len(t.Then) == 1 && t.Then[0].Delete {
			t.If = nil
		}
		return t
	}, "StaleReleaseRetry"},
	// Commits every write without its compares: an acquire no longer
	// checks that the slot is free.
	"unguarded-puts": {func(t lockstore.Txn) lockstore.Txn {
		for _, op := range t.Then {
			if !op.Delete {
				t.If = nil
			}
		}
		return t
	}, "Race"},
}

// rewrite rewrites each transaction before the backend commits it.
type rewrite struct {
	lockstore.Backend
	f func(lockstore.Txn) lockstore.Txn
}

func (r rewrite) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	return r.Backend.Txn(ctx, r.f(t))
}

// TestWrongBackend is the suite on the broken backend named by
// $LOCKTEST_WRONG; it runs only as TestSuiteCatchesWrong's child.
func TestWrongBackend(t *testing.T) {
	name := os.Getenv("LOCKTEST_WRONG")
	if name == "" {
		t.Skip("run by TestSuiteCatchesWrong")
	}
	locktest.Run(t, func(t *testing.T) locktest.Env {
		s, err := kv.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		b := rewrite{filelock.StoreBackend(s), wrongBackends[name].txn}
		holders := filepath.Join(s.Dir(), filelock.HolderDirName)
		return locktest.Env{
			Backend: b,
			New: func(opts ...filelock.Option) (*filelock.Locker, error) {
				return filelock.NewBackend(b, holders, opts...)
			},
			NewOn: func(b lockstore.Backend, opts ...filelock.Option) (*filelock.Locker, error) {
				return filelock.NewBackend(b, holders, opts...)
			},
			Kill: func(_ *filelock.Locker, h *filelock.Holder) { h.File().Close() },
		}
	})
}

// TestSuiteCatchesWrong runs the suite on each broken backend in a child
// test process and checks that it fails in the subtest that covers the
// bug.
func TestSuiteCatchesWrong(t *testing.T) {
	for name, w := range wrongBackends {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestWrongBackend$/^"+w.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), "LOCKTEST_WRONG="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed on %s:\n%s", name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestWrongBackend/"+w.subtest) {
				t.Fatalf("the suite failed on %s, but not in %s:\n%s", name, w.subtest, out)
			}
			t.Logf("%s: caught by %s", name, w.subtest)
		})
	}
}
