package kvapi_test

import (
	"context"
	"errors"
	"iter"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
	"github.com/kvstore/kv/kvapi/kvapitest"
)

func openStoreIn(t *testing.T, dir string) *kv.Store {
	t.Helper()
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopening opens KVs on stores, and compacts one (kvapitest.Compact) by
// closing its store and opening it again: a store's watch history starts
// at its open. The suite opens and compacts a subtest's KV with the
// subtest's t, which finds the store.
type reopening struct {
	mu     sync.Mutex
	stores map[*testing.T]*kv.Store
	wrap   func(kvapi.KV) kvapi.KV
}

func newReopening(wrap func(kvapi.KV) kvapi.KV) *reopening {
	if wrap == nil {
		wrap = func(db kvapi.KV) kvapi.KV { return db }
	}
	return &reopening{stores: map[*testing.T]*kv.Store{}, wrap: wrap}
}

func (r *reopening) openIn(t *testing.T, dir string) kvapi.KV {
	s := openStoreIn(t, dir)
	r.mu.Lock()
	r.stores[t] = s
	r.mu.Unlock()
	return r.wrap(kvapi.Local(s))
}

func (r *reopening) open(t *testing.T) kvapi.KV { return r.openIn(t, t.TempDir()) }

func (r *reopening) compact(t *testing.T, db kvapi.KV) kvapi.KV {
	r.mu.Lock()
	s := r.stores[t]
	r.mu.Unlock()
	db.Close()
	if err := s.Close(); err != nil { // its Cleanup closes it again, harmlessly
		t.Fatal(err)
	}
	return r.openIn(t, s.Dir())
}

func (r *reopening) run(t *testing.T) {
	kvapitest.Run(t, r.open, kvapitest.Compact(r.compact))
}

// TestLocal runs the conformance suite on the embedded store.
func TestLocal(t *testing.T) {
	newReopening(nil).run(t)
}

// TestLocalCAS runs it on the embedded store seen through Get, Range,
// Txn and Watch alone, so that Add and kv.AddOp's helpers run their
// compare-and-swap loop.
func TestLocalCAS(t *testing.T) {
	newReopening(func(db kvapi.KV) kvapi.KV { return plain{db} }).run(t)
}

// plain hides the Adder of the KV it wraps.
type plain struct{ kv kvapi.KV }

func (p plain) Get(ctx context.Context, key []byte) (kv.Entry, error) { return p.kv.Get(ctx, key) }
func (p plain) Range(ctx context.Context, start, end []byte, limit int) ([]kv.Entry, kv.Revision, error) {
	return p.kv.Range(ctx, start, end, limit)
}
func (p plain) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) { return p.kv.Txn(ctx, t) }
func (p plain) Close() error                                            { return p.kv.Close() }
func (p plain) Grant(ctx context.Context, ttl time.Duration) (kv.LeaseInfo, error) {
	return p.kv.Grant(ctx, ttl)
}
func (p plain) KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error) {
	return p.kv.KeepAlive(ctx, id)
}
func (p plain) Revoke(ctx context.Context, id kv.LeaseID) (kv.Revision, error) {
	return p.kv.Revoke(ctx, id)
}
func (p plain) Watch(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
	return p.kv.Watch(ctx, prefix, from, o)
}

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
	// Leaves out a watch's seventh event.
	"watch-drops-event": {eachEvent(func(i int, ev kv.Event, yield func(kv.Event) bool) bool {
		return i == 6 || yield(ev)
	}), "WatchOrder"},
	// Yields a watch's fifth event after its sixth.
	"watch-reorders": {func(db kvapi.KV) kvapi.KV {
		var held kv.Event
		return eachEvent(func(i int, ev kv.Event, yield func(kv.Event) bool) bool {
			switch i {
			case 4:
				held = ev
				return true
			case 5:
				return yield(ev) && yield(held)
			}
			return yield(ev)
		})(db)
	}, "WatchOrder"},
	// Yields a watch's fourth event twice, as a resumed watch might.
	"watch-doubles-event": {eachEvent(func(i int, ev kv.Event, yield func(kv.Event) bool) bool {
		return yield(ev) && (i != 3 || yield(ev))
	}), "WatchOrder"},
	// Never fills Prev.
	"watch-no-prev": {eachEvent(func(i int, ev kv.Event, yield func(kv.Event) bool) bool {
		ev.Prev = nil
		return yield(ev)
	}), "WatchPrev"},
	// Watches a prefix one byte shorter: "a/b/" as "a/b".
	"watch-loose-prefix": {func(db kvapi.KV) kvapi.KV {
		return watchHook{db, func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
			if len(prefix) > 0 {
				prefix = prefix[:len(prefix)-1]
			}
			return db.Watch(ctx, prefix, from, o)
		}}
	}, "WatchPrefix"},
	// Watches from the next revision when asked for one not yet
	// committed (kv.Store.Watch's bug before TestWatchFromFuture).
	"watch-future-from-now": {func(db kvapi.KV) kvapi.KV {
		return watchHook{db, func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
			// The revision now, read at the call: a from of 0 would be
			// read when the watch starts, which may be after the check's
			// first puts, and the bug would hide.
			if _, rev, err := db.Range(ctx, nil, nil, 1); err == nil && from > rev+1 {
				from = rev + 1
			}
			return db.Watch(ctx, prefix, from, o)
		}}
	}, "WatchPrefix"},
	// Goes on from the oldest revision held when the one asked for was
	// compacted, as if nothing was lost.
	"watch-skips-compacted": {func(db kvapi.KV) kvapi.KV {
		return watchHook{db, func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
			return func(yield func(kv.Event, error) bool) {
				for ev, err := range db.Watch(ctx, prefix, from, o) {
					var ce *kv.CompactedError
					if errors.As(err, &ce) {
						for ev, err := range db.Watch(ctx, prefix, ce.Oldest, o) {
							if !yield(ev, err) {
								return
							}
						}
						return
					}
					if !yield(ev, err) {
						return
					}
				}
			}
		}}
	}, "WatchCompacted"},
	// Names the compaction's own revision as the oldest a watch can
	// start from, where it is the one after.
	"watch-oldest-off-by-one": {func(db kvapi.KV) kvapi.KV {
		return watchHook{db, func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
			return func(yield func(kv.Event, error) bool) {
				for ev, err := range db.Watch(ctx, prefix, from, o) {
					var ce *kv.CompactedError
					if errors.As(err, &ce) {
						err = &kv.CompactedError{Requested: ce.Requested, Oldest: ce.Oldest - 1}
					}
					if !yield(ev, err) {
						return
					}
				}
			}
		}}
	}, "WatchCompacted"},
	// Drops the lease of every put: the keys outlive it.
	"lease-put-unbound": {func(db kvapi.KV) kvapi.KV {
		return txnHook{db, func(t kv.Txn) kv.Txn {
			for _, ops := range [][]kv.Op{t.Then, t.Else} {
				for i := range ops {
					ops[i].Lease = 0
				}
			}
			return t
		}}
	}, "LeaseRevoke"},
	// Adds by a put of the sum, which unbinds the key from its lease.
	"lease-add-unbinds": {func(db kvapi.KV) kvapi.KV { return putAdder{db} }, "LeaseBinding"},
	// Renews nothing, and says it did.
	"lease-keepalive-noop": {func(db kvapi.KV) kvapi.KV { return noRenew{db} }, "LeaseKeepAlive"},
	// Promises a deadline a second past the lease's end.
	"lease-deadline-late": {func(db kvapi.KV) kvapi.KV { return lateDeadline{db} }, "LeaseExpiry"},
	// A lease not found as an error of its own.
	"lease-error-plain": {func(db kvapi.KV) kvapi.KV { return plainLeaseErr{db} }, "LeaseInvalid"},
	// Ends a watch without its final error.
	"watch-ends-silently": {func(db kvapi.KV) kvapi.KV {
		return watchHook{db, func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
			return func(yield func(kv.Event, error) bool) {
				for ev, err := range db.Watch(ctx, prefix, from, o) {
					if err != nil || !yield(ev, nil) {
						return
					}
				}
			}
		}}
	}, "WatchEnds"},
}

// putAdder adds by compare-and-swap with a put of the sum.
type putAdder struct{ kvapi.KV }

func (a putAdder) Add(ctx context.Context, key []byte, delta int64, fence *kv.Fence) (int64, kv.Revision, error) {
	e, err := a.Get(ctx, key)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return 0, 0, err
	}
	n, _ := strconv.ParseInt(string(e.Value), 10, 64)
	n += delta
	res, err := a.Txn(ctx, kv.Txn{Fence: fence, If: []kv.Compare{kv.CompareModRev(key, kv.Equal, e.ModRev)},
		Then: []kv.Op{kv.PutOp(key, []byte(strconv.FormatInt(n, 10)))}})
	if err == nil && !res.Succeeded {
		err = errors.New("raced")
	}
	return n, res.Revision, err
}

// noRenew's KeepAlive renews nothing.
type noRenew struct{ kvapi.KV }

func (n noRenew) KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error) {
	ttl := 2 * time.Second
	return kv.LeaseInfo{ID: id, TTL: ttl, Deadline: time.Now().Add(ttl)}, nil
}

// lateDeadline's Grant moves the deadline a second on.
type lateDeadline struct{ kvapi.KV }

func (l lateDeadline) Grant(ctx context.Context, ttl time.Duration) (kv.LeaseInfo, error) {
	info, err := l.KV.Grant(ctx, ttl)
	info.Deadline = info.Deadline.Add(time.Second)
	return info, err
}

// plainLeaseErr's KeepAlive and Revoke lose kv.ErrLeaseNotFound.
type plainLeaseErr struct{ kvapi.KV }

func (p plainLeaseErr) KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error) {
	info, err := p.KV.KeepAlive(ctx, id)
	if errors.Is(err, kv.ErrLeaseNotFound) {
		err = errors.New(err.Error())
	}
	return info, err
}

func (p plainLeaseErr) Revoke(ctx context.Context, id kv.LeaseID) (kv.Revision, error) {
	rev, err := p.KV.Revoke(ctx, id)
	if errors.Is(err, kv.ErrLeaseNotFound) {
		err = errors.New(err.Error())
	}
	return rev, err
}

// watchHook replaces the wrapped KV's Watch.
type watchHook struct {
	kvapi.KV
	watch func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error]
}

func (h watchHook) Watch(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
	return h.watch(ctx, prefix, from, o)
}

// eachEvent wraps a KV whose watches pass their i-th event (from 0)
// through f, which yields what it will of it and reports whether to go
// on; the errors pass as they are.
func eachEvent(f func(i int, ev kv.Event, yield func(kv.Event) bool) bool) func(kvapi.KV) kvapi.KV {
	return func(db kvapi.KV) kvapi.KV {
		return watchHook{db, func(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
			return func(yield func(kv.Event, error) bool) {
				i := 0
				for ev, err := range db.Watch(ctx, prefix, from, o) {
					if err != nil {
						yield(ev, err)
						return
					}
					if !f(i, ev, func(ev kv.Event) bool { return yield(ev, nil) }) {
						return
					}
					i++
				}
			}
		}}
	}
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
	newReopening(wrong[name].wrap).run(t)
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
			if strings.Contains(string(out), "panic:") {
				t.Fatalf("the suite panicked on %s:\n%s", name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestWrongVariant/"+w.subtest) {
				t.Fatalf("the suite failed on %s, but not in %s:\n%s", name, w.subtest, out)
			}
			t.Logf("%s: caught by %s", name, w.subtest)
		})
	}
}

// TestLocalLeases: what the store's leases do that etcd's do not (the
// package doc's list): exact TTLs, and a revision for every lease
// operation, a grant, a renewal and the revoke of a lease without keys
// included.
func TestLocalLeases(t *testing.T) {
	db := kvapi.Local(openStoreIn(t, t.TempDir()))
	ctx := context.Background()
	info, err := db.Grant(ctx, 1500*time.Millisecond)
	if err != nil || info.TTL != 1500*time.Millisecond || info.ID != 1 {
		t.Fatalf("Grant: %+v, %v; want lease 1 (its revision) of 1.5 s", info, err)
	}
	if _, err := db.KeepAlive(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	r, err := db.Revoke(ctx, info.ID)
	if err != nil || r != 3 {
		t.Errorf("Revoke: revision %d, %v; want 3 (grant 1, renewal 2)", r, err)
	}
}
