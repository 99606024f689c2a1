// Package locktest is the acceptance suite of the lock library that
// holds on any backend, on one host or across hosts: package filelock
// runs it on the kv store (a store kept open, and a directory opened
// for each operation), the etcd module on an etcd cluster.
//
// # What it checks
//
// Acquire and release, with tokens that grow; TryAcquire's LockedError
// naming the holder; the takeover of a dead holder, whose release then
// deletes nothing (ErrLockLost) and whose fenced writes fail
// (kv.ErrFenced); a holder taken over by time (TimeOnly), its Lost
// channel, its Extend; slots and a slot count that disagrees; fenced
// writers with a current and a stale token; Sweep of dead holders, and a
// sweep that a takeover races between its judgment and its delete;
// bad names; many lockers racing for a slot (exactly one wins);
// contenders taking turns with fenced increments (none lost, tokens
// increasing); Acquire waking on a release; and a release whose commit
// succeeded but whose answer was lost, retried after the same locker
// took the lock again (etcd-io/etcd#22082's shape): the retry deletes
// nothing.
//
// # Usage
//
//	locktest.Run(t, func(t *testing.T) locktest.Env { ... })
//
// Run calls its function once per subtest for a fresh, empty store.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
)

// Env is one subtest's store, as the suite needs it.
type Env struct {
	// Backend is the store, for reads and for the suite's wrappers.
	Backend lockstore.Backend
	// New returns a Locker on the store, as another process (on another
	// host, for a backend that spans hosts) would have it.
	New func(opts ...filelock.Option) (*filelock.Locker, error)
	// NewOn returns a Locker on b, a wrapper of Backend.
	NewOn func(b lockstore.Backend, opts ...filelock.Option) (*filelock.Locker, error)
	// Kill makes h, a holder of l that holds nothing else, look like a
	// holder whose process died, without releasing: on the kv store its
	// holder file is closed, on etcd l's lease ends.
	Kill func(l *filelock.Locker, h *filelock.Holder)
	// SelfCleaning says the store deletes a dead holder's key by itself
	// (a lease's end), so that Sweep finds nothing left to remove.
	SelfCleaning bool
}

// timeout bounds each subtest's calls.
const timeout = time.Minute

// Run runs the suite, each check a subtest on an Env of env.
func Run(t *testing.T, env func(t *testing.T) Env) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, Env)
	}{
		{"AcquireRelease", testAcquireRelease},
		{"TakeoverOfDeadHolder", testTakeoverOfDeadHolder},
		{"ReleaseAfterTakeover", testReleaseAfterTakeover},
		{"ExtendKeepsTimeOnlyHolder", testExtendKeepsTimeOnlyHolder},
		{"Slots", testSlots},
		{"FencedWriter", testFencedWriter},
		{"Sweep", testSweep},
		{"SweepJudgedStale", testSweepJudgedStale},
		{"Names", testNames},
		{"Race", testRace},
		{"Contention", testContention},
		{"AcquireWaits", testAcquireWaits},
		{"StaleReleaseRetry", testStaleReleaseRetry},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, env(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func newLocker(t *testing.T, e Env, opts ...filelock.Option) *filelock.Locker {
	t.Helper()
	l, err := e.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAcquire(t *testing.T, l *filelock.Locker, name string) *filelock.Holder {
	t.Helper()
	h, err := l.TryAcquire(name)
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", name, err)
	}
	return h
}

func value(t *testing.T, e Env, key string) string {
	t.Helper()
	kv, ok, err := e.Backend.Get(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "<absent>"
	}
	return string(kv.Value)
}

func testAcquireRelease(t *testing.T, e Env) {
	l := newLocker(t, e)
	h := mustAcquire(t, l, "job")
	if h.Token() <= 0 {
		t.Fatalf("token %d", h.Token())
	}
	_, err := newLocker(t, e).TryAcquire("job")
	var le *filelock.LockedError
	if !errors.As(err, &le) || !errors.Is(err, filelock.ErrLocked) {
		t.Fatalf("second TryAcquire: %v, want a LockedError", err)
	}
	if len(le.Holders) != 1 || le.Holders[0].Token != h.Token() || !le.Holders[0].Alive {
		t.Fatalf("LockedError names %+v", le.Holders)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); !errors.Is(err, filelock.ErrReleased) {
		t.Fatalf("second Release: %v", err)
	}
	h2 := mustAcquire(t, l, "job")
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after %d", h2.Token(), h.Token())
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
	if infos, err := l.List(ctxFor(t)); err != nil || len(infos) != 0 {
		t.Fatalf("after release: %+v, %v", infos, err)
	}
}

// testTakeoverOfDeadHolder: a holder whose process died is taken over
// with a larger token; its release then deletes nothing, and its fenced
// writes fail.
func testTakeoverOfDeadHolder(t *testing.T, e Env) {
	la := newLocker(t, e)
	a := mustAcquire(t, la, "job")
	e.Kill(la, a)
	b := mustAcquire(t, newLocker(t, e), "job")
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
	ctx := ctxFor(t)
	if _, err := a.Put(ctx, "data", []byte("a, dead")); !errors.Is(err, kv.ErrFenced) || !errors.Is(err, filelock.ErrFenced) {
		t.Fatalf("fenced put of the dead holder: %v", err)
	}
	if err := a.ReleaseContext(ctx); !errors.Is(err, filelock.ErrLockLost) {
		t.Fatalf("release of the dead holder: %v, want ErrLockLost", err)
	}
	if _, err := b.Put(ctx, "data", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatalf("the new holder's release: %v", err)
	}
	if v := value(t, e, "data"); v != "b" {
		t.Fatalf("data = %q", v)
	}
}

// staleWindow is the TimeOnly window of the suite: long enough for a
// few store operations on a loaded machine.
const staleWindow = 400 * time.Millisecond

// testReleaseAfterTakeover: a holder judged stale by time while it still
// runs is taken over; it learns it through Lost, ErrLockLost and
// ErrFenced, and deletes nothing of its successor's.
func testReleaseAfterTakeover(t *testing.T, e Env) {
	opts := []filelock.Option{filelock.WithStrategy(filelock.TimeOnly), filelock.WithStaleAfter(staleWindow)}
	l := newLocker(t, e, opts...)
	a := mustAcquire(t, l, "job")
	lost := a.Lost()
	time.Sleep(staleWindow + staleWindow/4)
	b := mustAcquire(t, newLocker(t, e, opts...), "job")
	if err := a.Release(); !errors.Is(err, filelock.ErrLockLost) {
		t.Fatalf("Release of the holder taken over: %v, want ErrLockLost", err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed")
	}
	ctx := ctxFor(t)
	if err := a.Extend(ctx); !errors.Is(err, filelock.ErrReleased) {
		t.Fatalf("Extend after Release: %v", err)
	}
	infos, err := l.List(ctx)
	if err != nil || len(infos) != 1 || infos[0].Token != b.Token() {
		t.Fatalf("after the old holder's Release: %+v %v, want b's lock (token %d)", infos, err, b.Token())
	}
	if _, err := a.Put(ctx, "k", []byte("a")); !errors.Is(err, kv.ErrFenced) || !errors.Is(err, filelock.ErrFenced) {
		t.Fatalf("fenced put of the old holder: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
}

// testExtendKeepsTimeOnlyHolder: a time-only holder that extends is not
// taken over across two windows and more; once it stops, it is.
//
// The extends are bounded by a count, not by the clock: extendRounds of
// them, staleWindow/4 apart, span two windows however fast the store.
// A try says something only when it and the extend before it fit in the
// window: a try that took the holder after longer than that may have
// judged it stale rightly, and the test skips, on a machine too loaded
// to tell, rather than fail.
func testExtendKeepsTimeOnlyHolder(t *testing.T, e Env) {
	const extendRounds = 8
	opts := []filelock.Option{filelock.WithStrategy(filelock.TimeOnly), filelock.WithStaleAfter(staleWindow)}
	l := newLocker(t, e, opts...)
	other := newLocker(t, e, opts...)
	h := mustAcquire(t, l, "job")
	ctx := ctxFor(t)
	for range extendRounds {
		extended := time.Now() // the marker's renewal time is no earlier
		if err := h.Extend(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := other.TryAcquire("job")
		if took := time.Since(extended); err == nil && took > staleWindow {
			t.Skipf("an extend and a try took %v, past the %v window: too loaded a machine to tell a holder taken while it extends from one judged stale", took, staleWindow)
		}
		if !errors.Is(err, filelock.ErrLocked) {
			t.Fatalf("a holder that extends was taken: %v", err)
		}
		time.Sleep(staleWindow / 4)
	}
	time.Sleep(staleWindow + staleWindow/4)
	h2 := mustAcquire(t, other, "job")
	if err := h.Extend(ctx); !errors.Is(err, filelock.ErrLockLost) {
		t.Fatalf("Extend after the takeover: %v", err)
	}
	h2.Release()
}

func testSlots(t *testing.T, e Env) {
	l := newLocker(t, e, filelock.WithSlots(3))
	var hs []*filelock.Holder
	seen := map[int64]bool{}
	for range 3 {
		h := mustAcquire(t, l, "pool")
		if seen[h.Token()] {
			t.Fatalf("token %d twice", h.Token())
		}
		seen[h.Token()] = true
		hs = append(hs, h)
	}
	if _, err := l.TryAcquire("pool"); !errors.Is(err, filelock.ErrLocked) {
		t.Fatalf("4th of 3: %v", err)
	}
	l2 := newLocker(t, e, filelock.WithSlots(2))
	var se *filelock.SlotsError
	if _, err := l2.TryAcquire("pool"); !errors.As(err, &se) || se.Have != 3 || se.Want != 2 {
		t.Fatalf("another slot count: %v", err)
	}
	hs[1].Release()
	h := mustAcquire(t, l, "pool")
	if h.Slot() != 1 {
		t.Fatalf("slot %d, want the freed 1", h.Slot())
	}
	for _, h := range append(hs, h) {
		h.Release()
	}
	// With every holder gone, another count may take the lock.
	h2 := mustAcquire(t, l2, "pool")
	h2.Release()
}

func testFencedWriter(t *testing.T, e Env) {
	l := newLocker(t, e)
	h := mustAcquire(t, l, "job")
	ctx := ctxFor(t)
	fw := newLocker(t, e).Fenced("job", h.Token())
	if _, err := fw.Put(ctx, "data", []byte("1")); err != nil {
		t.Fatal(err)
	}
	stale := l.Fenced("job", h.Token()-1)
	if _, err := stale.Put(ctx, "data", []byte("2")); !errors.Is(err, kv.ErrFenced) {
		t.Fatalf("stale token: %v", err)
	}
	if _, err := h.Txn(ctx, lockstore.Txn{Then: []lockstore.Op{lockstore.Put("data2", []byte("x"))}}); err != nil {
		t.Fatalf("the holder's Txn: %v", err)
	}
	h.Release()
	if _, err := fw.Put(ctx, "data", []byte("3")); !errors.Is(err, filelock.ErrFenced) {
		t.Fatalf("after release: %v", err)
	}
	if _, err := fw.Delete(ctx, "data"); !errors.Is(err, filelock.ErrFenced) {
		t.Fatalf("delete after release: %v", err)
	}
	if v := value(t, e, "data"); v != "1" {
		t.Fatalf("data = %q", v)
	}
}

func testSweep(t *testing.T, e Env) {
	la := newLocker(t, e)
	l := newLocker(t, e)
	a := mustAcquire(t, la, "a")
	b := mustAcquire(t, l, "b")
	e.Kill(la, a)
	rm, err := l.Sweep(ctxFor(t))
	switch {
	case err != nil:
		t.Fatalf("Sweep: %v", err)
	case e.SelfCleaning && len(rm) != 0:
		t.Fatalf("Sweep removed %+v; the store removes dead holders itself", rm)
	case !e.SelfCleaning && (len(rm) != 1 || rm[0].Name != "a" || rm[0].Token != a.Token()):
		t.Fatalf("Sweep removed %+v, want a's lock", rm)
	}
	infos, _ := l.List(ctxFor(t))
	if len(infos) != 1 || infos[0].Name != "b" {
		t.Fatalf("left: %+v", infos)
	}
	b.Release()
}

// leased is a wrapper of a backend with leases, which keeps them.
type leased struct {
	lockstore.Backend
	lockstore.Leaser
}

// keepLeaser returns wrapped, a wrapper of orig, with orig's leases if
// it has them.
func keepLeaser(orig, wrapped lockstore.Backend) lockstore.Backend {
	if l, ok := orig.(lockstore.Leaser); ok {
		return leased{wrapped, l}
	}
	return wrapped
}

// hookBackend runs before once, before the first Txn.
type hookBackend struct {
	lockstore.Backend
	mu     sync.Mutex
	before func()
}

func (h *hookBackend) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	h.mu.Lock()
	f := h.before
	h.before = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return h.Backend.Txn(ctx, t)
}

// testSweepJudgedStale: a takeover commits between the sweep's judgment
// of a dead holder and its delete. The delete, conditional on the
// revision judged, fails, and the new holder's key stays.
func testSweepJudgedStale(t *testing.T, e Env) {
	opts := []filelock.Option{filelock.WithStrategy(filelock.TimeOnly), filelock.WithStaleAfter(staleWindow)}
	l := newLocker(t, e, opts...)
	dead := mustAcquire(t, l, "job")
	time.Sleep(staleWindow + staleWindow/4)
	var taker *filelock.Holder
	hb := &hookBackend{Backend: e.Backend, before: func() { taker = mustAcquire(t, newLocker(t, e, opts...), "job") }}
	sweeper, err := e.NewOn(keepLeaser(e.Backend, hb), opts...)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := sweeper.Sweep(ctxFor(t))
	if err != nil || len(removed) != 0 {
		t.Fatalf("Sweep: removed %+v, %v; want nothing", removed, err)
	}
	if taker == nil || taker.Token() <= dead.Token() {
		t.Fatalf("the takeover did not run, or gave token %v", taker)
	}
	kv, ok, err := e.Backend.Get(ctxFor(t), taker.Key())
	if err != nil || !ok || kv.CreateRev != taker.Token() {
		t.Fatalf("the takeover's key: %v, %v, create revision %d, want %d", ok, err, kv.CreateRev, taker.Token())
	}
	taker.Release()
}

func testNames(t *testing.T, e Env) {
	l := newLocker(t, e)
	for _, n := range []string{"", ".x", "a/b", "a b", string(make([]byte, 200))} {
		if _, err := l.TryAcquire(n); !errors.Is(err, filelock.ErrInvalid) {
			t.Errorf("name %q: %v", n, err)
		}
	}
	if _, err := e.New(filelock.WithStrategy(filelock.TimeOnly)); !errors.Is(err, filelock.ErrInvalid) {
		t.Errorf("time-only without a window: %v", err)
	}
}

// testRace: lockers racing for one free slot; exactly one wins, in each
// of several rounds (one round lets a backend without the compare slip
// through when the racers happen to run one after the other).
func testRace(t *testing.T, e Env) {
	const n, rounds = 8, 10
	ls := make([]*filelock.Locker, n)
	for i := range ls {
		ls[i] = newLocker(t, e)
	}
	for round := range rounds {
		name := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		won := make(chan *filelock.Holder, n)
		for _, l := range ls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h, err := l.TryAcquire(name)
				if err == nil {
					won <- h
				} else if !errors.Is(err, filelock.ErrLocked) {
					t.Errorf("TryAcquire: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(won)
		var hs []*filelock.Holder
		for h := range won {
			hs = append(hs, h)
		}
		if len(hs) != 1 {
			t.Fatalf("round %d: %d winners of %d racers", round, len(hs), n)
		}
		hs[0].Release()
	}
}

// testContention: contenders take turns, each incrementing a counter
// under its fence; no increment is lost and each holder's token is
// larger than the one before it.
func testContention(t *testing.T, e Env) {
	const workers, rounds = 4, 4
	ctx := ctxFor(t)
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for range workers {
		l := newLocker(t, e)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				h, err := l.Acquire(ctx, "turns")
				if err != nil {
					t.Error(err)
					return
				}
				kv, _, err := e.Backend.Get(ctx, "counter")
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(kv.Value))
				if _, err := h.Put(ctx, "counter", []byte(strconv.Itoa(n+1))); err != nil {
					t.Error(err)
				}
				mu.Lock()
				tokens = append(tokens, h.Token())
				mu.Unlock()
				if err := h.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if v := value(t, e, "counter"); v != strconv.Itoa(workers*rounds) {
		t.Fatalf("counter = %s after %d fenced increments", v, workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens in order of acquisition: %v", tokens)
		}
	}
}

// testAcquireWaits: Acquire returns once the holder releases, with a
// larger token, and a TryAcquire meanwhile fails.
func testAcquireWaits(t *testing.T, e Env) {
	l := newLocker(t, e)
	h := mustAcquire(t, l, "job")
	got := make(chan *filelock.Holder, 1)
	go func() {
		h2, err := newLocker(t, e).Acquire(ctxFor(t), "job")
		if err != nil {
			t.Error(err)
		}
		got <- h2
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("Acquire returned while the lock was held")
	default:
	}
	released := time.Now()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	h2 := <-got
	if h2 == nil {
		return
	}
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after %d", h2.Token(), h.Token())
	}
	t.Logf("the waiter had the lock %v after the release", time.Since(released).Round(time.Millisecond))
	h2.Release()
}

// lostAnswer commits one transaction that deletes key and then reports
// an error, as a timeout after the commit would.
type lostAnswer struct {
	lockstore.Backend
	mu    sync.Mutex
	armed bool
	key   string
}

var errLostAnswer = errors.New("locktest: the answer was lost (the write committed)")

func (b *lostAnswer) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	res, err := b.Backend.Txn(ctx, t)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && b.armed && len(t.Then) == 1 && t.Then[0].Delete && t.Then[0].Key == b.key {
		b.armed = false
		return lockstore.TxnResult{}, errLostAnswer
	}
	return res, err
}

// testStaleReleaseRetry is etcd-io/etcd#22082's shape: a release commits
// but its caller sees an error; the same locker takes the lock again
// (the same slot key, a newer create revision); the first release is
// retried. The retry must delete nothing: it compares the key's create
// revision with its own token.
func testStaleReleaseRetry(t *testing.T, e Env) {
	lb := &lostAnswer{Backend: e.Backend}
	l, err := e.NewOn(keepLeaser(e.Backend, lb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h1 := mustAcquire(t, l, "job")
	lb.mu.Lock()
	lb.armed, lb.key = true, h1.Key()
	lb.mu.Unlock()
	if err := h1.Release(); !errors.Is(err, errLostAnswer) {
		t.Fatalf("first release: %v, want the lost answer", err)
	}
	h2 := mustAcquire(t, l, "job")
	if h2.Key() != h1.Key() || h2.Token() <= h1.Token() {
		t.Fatalf("the second acquisition: key %q token %d, after %q %d", h2.Key(), h2.Token(), h1.Key(), h1.Token())
	}
	if err := h1.Release(); !errors.Is(err, filelock.ErrLockLost) {
		t.Fatalf("the retried release: %v, want ErrLockLost", err)
	}
	kv, ok, err := e.Backend.Get(ctxFor(t), h2.Key())
	if err != nil || !ok || kv.CreateRev != h2.Token() {
		t.Fatalf("the second holder's key after the retry: present %v, create revision %d, %v; want %d", ok, kv.CreateRev, err, h2.Token())
	}
	if _, err := h2.Put(ctxFor(t), "data", []byte("h2")); err != nil {
		t.Fatalf("the second holder's fenced write: %v", err)
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
}
