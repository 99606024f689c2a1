package kvapi_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
	"github.com/kvstore/kv/kvapi/kvapitest"
)

func openStore(t *testing.T) *kv.Store {
	t.Helper()
	s, err := kv.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestLocal runs the conformance suite on the embedded store.
func TestLocal(t *testing.T) {
	kvapitest.Run(t, func(t *testing.T) kvapi.KV { return kvapi.Local(openStore(t)) })
}

// TestLocalCAS runs it on the embedded store seen through Get, Range and
// Txn alone, so that Add and kv.AddOp's helpers run their
// compare-and-swap loop.
func TestLocalCAS(t *testing.T) {
	kvapitest.Run(t, func(t *testing.T) kvapi.KV { return plain{kvapi.Local(openStore(t))} })
}

// plain hides the Adder of the KV it wraps.
type plain struct{ kv kvapi.KV }

func (p plain) Get(ctx context.Context, key []byte) (kv.Entry, error) { return p.kv.Get(ctx, key) }
func (p plain) Range(ctx context.Context, start, end []byte, limit int) ([]kv.Entry, kv.Revision, error) {
	return p.kv.Range(ctx, start, end, limit)
}
func (p plain) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) { return p.kv.Txn(ctx, t) }
func (p plain) Close() error                                            { return p.kv.Close() }

// wrong are deliberately broken KVs over the embedded store: the suite
// must fail on each, in the subtest named.
var wrong = map[string]struct {
	wrap    func(kvapi.KV) kvapi.KV
	subtest string
}{
	// Drops the fence: stale writes commit.
	"ignores-fence": {func(db kvapi.KV) kvapi.KV {
		return txnHook{db, func(t kv.Txn) kv.Txn { t.Fence = nil; return t }}
	}, "Fences"},
	// Compares a fence by mod revision as by create revision.
	"fence-by-create-only": {func(db kvapi.KV) kvapi.KV {
		return txnHook{db, func(t kv.Txn) kv.Txn {
			if t.Fence != nil {
				f := *t.Fence
				f.By = kv.FenceCreateRev
				t.Fence = &f
			}
			return t
		}}
	}, "Fences"},
	// etcd's value compare on an absent key: NotEqual fails too.
	"absent-value-not-equal-fails": {func(db kvapi.KV) kvapi.KV {
		return txnHook{db, func(t kv.Txn) kv.Txn {
			for i, c := range t.If {
				if c.Target == kv.CompareValue(nil, kv.Equal, nil).Target && c.Cmp == kv.NotEqual {
					// value != v and the key exists
					t.If = append(t.If[:i:i], append([]kv.Compare{c, kv.Exists(c.Key)}, t.If[i+1:]...)...)
					break
				}
			}
			return t
		}}
	}, "Compares"},
	// Runs Then whatever the compares say.
	"no-else": {func(db kvapi.KV) kvapi.KV {
		return txnHook{db, func(t kv.Txn) kv.Txn { t.If = nil; return t }}
	}, "Else"},
}

// txnHook rewrites each transaction before the wrapped KV commits it.
type txnHook struct {
	kvapi.KV
	f func(kv.Txn) kv.Txn
}

func (h txnHook) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	return h.KV.Txn(ctx, h.f(t))
}

// TestWrongVariant is the suite on one broken KV, named by
// $KVAPITEST_WRONG; it runs only as TestSuiteCatchesWrong's child.
func TestWrongVariant(t *testing.T) {
	name := os.Getenv("KVAPITEST_WRONG")
	if name == "" {
		t.Skip("run by TestSuiteCatchesWrong")
	}
	w := wrong[name]
	kvapitest.Run(t, func(t *testing.T) kvapi.KV { return w.wrap(kvapi.Local(openStore(t))) })
}

// TestSuiteCatchesWrong runs the suite on each broken KV, in a child
// test process, and checks that it fails in the subtest that covers the
// bug.
func TestSuiteCatchesWrong(t *testing.T) {
	for name, w := range wrong {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestWrongVariant$/^"+w.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), "KVAPITEST_WRONG="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed on %s:\n%s", name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestWrongVariant/"+w.subtest) {
				t.Fatalf("the suite failed on %s, but not in %s:\n%s", name, w.subtest, out)
			}
			t.Logf("%s: caught by %s", name, w.subtest)
		})
	}
}
