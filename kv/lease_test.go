package kv_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/fakeclock"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
)

// t0 is the fake clocks' start: deadlines are t0 plus a few seconds.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func leaseStore(t *testing.T) (*kv.Store, *vfs.MemFS, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(t0)
	s, fsys := memStore(t, &kv.Options{Clock: clk})
	return s, fsys, clk
}

// must returns v, or ends the test with err: the test runs `defer
// catch(t)` first.
func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(mustFailed{fmt.Errorf("%s:%d: %w", filepath.Base(file), line, err)})
	}
	return v
}

type mustFailed struct{ err error }

// catch turns a must's failure into the test's.
func catch(t *testing.T) {
	if r := recover(); r != nil {
		if m, ok := r.(mustFailed); ok {
			t.Fatal(m.err)
		}
		panic(r)
	}
}

// leaseKeys is a store's leases as id -> keys, for a diff.
func leaseKeys(t *testing.T, s *kv.Store) map[kv.LeaseID][]string {
	out := map[kv.LeaseID][]string{}
	for _, le := range must(s.Leases()) {
		keys := []string{}
		for _, k := range le.Keys {
			keys = append(keys, string(k))
		}
		out[le.ID] = keys
	}
	return out
}

// TestLeaseExpires: keys on a lease are there until its deadline; from
// the deadline on no read returns them, and the store commits one expire
// record that deletes them, which a watcher sees as deletes at one
// revision, without any write to prompt it.
func TestLeaseExpires(t *testing.T) {
	defer catch(t)
	s, _, clk := leaseStore(t)
	id := must(s.Grant(10 * time.Second))
	if id != 1 {
		t.Errorf("first lease id %d, want 1 (its grant's revision)", id)
	}
	must(s.PutLease([]byte("a"), []byte("1"), id))
	must(s.PutLease([]byte("b"), []byte("2"), id))
	rev := must(s.Put([]byte("c"), []byte("plain")))
	c := collectWatch(t, func(ctx context.Context) kvWatch { return s.Watch(ctx, nil, rev+1) })

	info := must(s.Lease(id))
	if !info.Deadline.Equal(t0.Add(10*time.Second)) || info.TTL != 10*time.Second {
		t.Errorf("lease %+v, want deadline t0+10s, TTL 10s", info)
	}
	clk.Advance(10*time.Second - 1)
	if _, err := s.Get([]byte("a")); err != nil {
		t.Fatalf("1 ns before the deadline: %v", err)
	}
	clk.Advance(1)
	for _, k := range []string{"a", "b"} {
		if _, err := s.Get([]byte(k)); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("Get(%s) at the deadline: %v, want ErrNotFound", k, err)
		}
	}
	if diff := cmp.Diff(map[string]string{"c": "plain"}, dumpStore(s)); diff != "" {
		t.Errorf("Scan at the deadline (-want +got):\n%s", diff)
	}
	if _, err := s.Lease(id); !errors.Is(err, kv.ErrLeaseExpired) || !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Errorf("Lease after the deadline: %v, want ErrLeaseExpired", err)
	}
	// The expiry, committed by the store's timer: one record.
	got := c.take(t, 2)
	want := []ev{{Type: "delete", Key: "a", Rev: int64(rev + 1), Prev: "-"}, {Type: "delete", Key: "b", Rev: int64(rev + 1), Prev: "-"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if r := s.Revision(); r != rev+1 {
		t.Errorf("revision %d after the expiry, want %d", r, rev+1)
	}
	if _, err := s.KeepAlive(id); !errors.Is(err, kv.ErrLeaseExpired) {
		t.Errorf("KeepAlive of the expired lease: %v, want ErrLeaseExpired", err)
	}
	if _, err := s.PutLease([]byte("d"), []byte("1"), id); !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Errorf("PutLease on the expired lease: %v, want ErrLeaseNotFound", err)
	}
	if r := s.Revision(); r != rev+1 {
		t.Errorf("refused lease operations committed: revision %d", r)
	}
}

type kvWatch = iter.Seq2[kv.Event, error]

// TestLeaseExpiresBeforeWrites: a write evaluated at or after a deadline
// sees the lease ended, even before the store's timer has fired: its
// compare finds the key absent, and the expiry's revision comes first.
func TestLeaseExpiresBeforeWrites(t *testing.T) {
	defer catch(t)
	clk := fakeclock.New(t0)
	// A clock whose After never fires: only the writes can end leases.
	s, _ := memStore(t, &kv.Options{Clock: stuckClock{clk}})
	id := must(s.Grant(time.Second))
	rev := must(s.PutLease([]byte("lock"), []byte("holder"), id))
	clk.Advance(time.Second)
	res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Absent([]byte("lock"))}, Then: []kv.Op{kv.PutOp([]byte("lock"), []byte("next"))}})
	if err != nil || !res.Succeeded || res.Revision != rev+2 {
		t.Fatalf("Txn after the deadline: %+v, %v; want it to succeed at %d, after the expiry at %d", res, err, rev+2, rev+1)
	}
	e := must(s.Get([]byte("lock")))
	if string(e.Value) != "next" || e.CreateRev != rev+2 {
		t.Errorf("lock = %+v", e)
	}
	if got := leaseKeys(t, s); len(got) != 0 {
		t.Errorf("leases after the expiry: %v", got)
	}
}

// eventually waits until cond holds, up to 20 s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 20 s")
		}
	}
}

// stuckClock is a clock whose timers never fire.
type stuckClock struct{ *fakeclock.Clock }

func (stuckClock) After(time.Duration) <-chan time.Time { return nil }

// TestLeaseKeepAlive: a renewal moves the deadline to the clock plus the
// TTL, never earlier than it was (a clock stepped back keeps it), and is
// what keeps the keys past the first deadline.
func TestLeaseKeepAlive(t *testing.T) {
	defer catch(t)
	s, _, clk := leaseStore(t)
	id := must(s.Grant(10 * time.Second))
	must(s.PutLease([]byte("k"), []byte("v"), id))
	clk.Advance(6 * time.Second)
	info := must(s.KeepAlive(id))
	if want := t0.Add(16 * time.Second); !info.Deadline.Equal(want) || info.TTL != 10*time.Second || info.ID != id {
		t.Errorf("KeepAlive = %+v, want deadline %v", info, want)
	}
	clk.Set(t0) // stepped back: now+TTL is t0+10s, earlier than the deadline
	if info := must(s.KeepAlive(id)); !info.Deadline.Equal(t0.Add(16 * time.Second)) {
		t.Errorf("KeepAlive under a clock stepped back moved the deadline to %v", info.Deadline)
	}
	clk.Set(t0.Add(15 * time.Second))
	if _, err := s.Get([]byte("k")); err != nil {
		t.Errorf("past the first deadline, renewed: %v", err)
	}
	clk.Set(t0.Add(16 * time.Second))
	if _, err := s.Get([]byte("k")); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("at the renewed deadline: %v", err)
	}
}

// TestLeaseRevoke: a revoke deletes the lease's keys at the revision it
// returns, in one record; a second revoke finds no lease, and says so
// without calling it expired.
func TestLeaseRevoke(t *testing.T) {
	defer catch(t)
	s, _, _ := leaseStore(t)
	id := must(s.Grant(time.Minute))
	must(s.PutLease([]byte("a"), []byte("1"), id))
	must(s.PutLease([]byte("b"), []byte("1"), id))
	must(s.Put([]byte("c"), []byte("1")))
	before := s.Revision()
	c := collectWatch(t, func(ctx context.Context) kvWatch { return s.Watch(ctx, nil, before+1) })
	rev := must(s.Revoke(id))
	if rev != before+1 {
		t.Errorf("Revoke at %d, want %d", rev, before+1)
	}
	if diff := cmp.Diff([]ev{{Type: "delete", Key: "a", Rev: int64(rev), Prev: "-"}, {Type: "delete", Key: "b", Rev: int64(rev), Prev: "-"}}, c.take(t, 2)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"c": "1"}, dumpStore(s)); diff != "" {
		t.Errorf("after the revoke (-want +got):\n%s", diff)
	}
	_, err := s.Revoke(id)
	if !errors.Is(err, kv.ErrLeaseNotFound) || errors.Is(err, kv.ErrLeaseExpired) {
		t.Errorf("second Revoke: %v, want ErrLeaseNotFound and not ErrLeaseExpired", err)
	}
	var le *kv.LeaseError
	if !errors.As(err, &le) || le.ID != id {
		t.Errorf("second Revoke: %v, want a *LeaseError naming lease %d", err, id)
	}
}

// TestLeaseBinding: which writes bind, unbind and keep a key's lease
// (FORMAT.md, "Leases"): a put on a lease binds (and moves the key off
// another), a plain put and a delete unbind, an add keeps; a transaction
// binds too; a put on a lease that is not live writes nothing.
func TestLeaseBinding(t *testing.T) {
	defer catch(t)
	s, _, _ := leaseStore(t)
	l1 := must(s.Grant(time.Minute))
	l2 := must(s.Grant(time.Hour))
	must(s.PutLease([]byte("a"), []byte("1"), l1))
	must(s.PutLease([]byte("b"), []byte("1"), l1))
	must(s.PutLease([]byte("c"), []byte("1"), l1))
	must(s.PutLease([]byte("n"), []byte("1"), l1))
	must(s.PutLease([]byte("a"), []byte("2"), l2)) // moved
	must(s.Put([]byte("b"), []byte("2")))          // unbound
	must(s.Delete([]byte("c")))                    // unbound, gone
	_, _, err := s.Add([]byte("n"), 5)             // kept
	if err != nil {
		t.Fatal(err)
	}
	must(s.Txn(kv.Txn{If: []kv.Compare{kv.Absent([]byte("t"))},
		Then: []kv.Op{kv.PutOp([]byte("t"), []byte("1")).WithLease(l2), kv.PutOp([]byte("u"), []byte("1"))}}))
	want := map[kv.LeaseID][]string{l1: {"n"}, l2: {"a", "t"}}
	if diff := cmp.Diff(want, leaseKeys(t, s)); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	rev := s.Revision()
	if _, err := s.PutLease([]byte("x"), []byte("1"), 99); !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Errorf("PutLease on lease 99: %v", err)
	}
	if _, err := s.Txn(kv.Txn{Then: []kv.Op{kv.PutOp([]byte("y"), []byte("1")), kv.PutOp([]byte("x"), []byte("1")).WithLease(99)}}); !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Errorf("Txn with a put on lease 99: %v", err)
	}
	if _, err := s.Txn(kv.Txn{Then: []kv.Op{kv.DeleteOp([]byte("a")).WithLease(l1)}}); !errors.Is(err, kv.ErrInvalid) {
		t.Errorf("a delete on a lease: %v, want ErrInvalid", err)
	}
	if _, err := s.Grant(0); !errors.Is(err, kv.ErrInvalid) {
		t.Errorf("Grant(0): %v, want ErrInvalid", err)
	}
	if _, err := s.Get([]byte("y")); !errors.Is(err, kv.ErrNotFound) || s.Revision() != rev {
		t.Errorf("refused writes committed something: revision %d, want %d", s.Revision(), rev)
	}
	// Revoking l1 deletes n only: the keys moved off it or unbound stay.
	must(s.Revoke(l1))
	if diff := cmp.Diff(map[string]string{"a": "2", "b": "2", "t": "1", "u": "1"}, dumpStore(s)); diff != "" {
		t.Errorf("after revoking lease %d (-want +got):\n%s", l1, diff)
	}
}

// TestLeaseRestart: a restart changes no deadline. Reopened before the
// deadline, the lease has the deadline it had; reopened after it, whether
// the store was closed or lost its process (a power loss after the
// grant's acknowledgement), the open commits the expiry before any write
// and no read sees the keys.
func TestLeaseRestart(t *testing.T) {
	defer catch(t)
	s, fsys, clk := leaseStore(t)
	id := must(s.Grant(10 * time.Second))
	must(s.PutLease([]byte("a"), []byte("1"), id))
	clk.Advance(4 * time.Second)
	must(s.KeepAlive(id)) // deadline t0+14s
	crashed := fsys.CrashClone()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]*vfs.MemFS{"closed": fsys, "power loss": crashed} {
		t.Run(name, func(t *testing.T) {
			clk := fakeclock.New(t0.Add(13 * time.Second))
			s := reopen(t, dir.Clone(), kv.Options{Clock: stuckClock{clk}})
			info := must(s.Lease(id))
			if !info.Deadline.Equal(t0.Add(14 * time.Second)) {
				t.Errorf("deadline %v after a restart, want t0+14s", info.Deadline.Sub(t0))
			}
			s.Close()

			clk.Set(t0.Add(14 * time.Second))
			s = reopen(t, dir.Clone(), kv.Options{Clock: stuckClock{clk}})
			rev := s.Revision()
			if _, err := s.Get([]byte("a")); !errors.Is(err, kv.ErrNotFound) {
				t.Errorf("Get after the deadline, before any write: %v", err)
			}
			w := must(s.Put([]byte("w"), []byte("1")))
			if w != rev+2 {
				t.Errorf("the first write after the reopen at %d, want %d: the expiry first", w, rev+2)
			}
			if len(leaseKeys(t, s)) != 0 {
				t.Error("the lease outlived its deadline across a restart")
			}
		})
	}
}

// TestLeaseExpiresAtOpen: a store opened after a deadline commits the
// expiry on its own, with no write to prompt it.
func TestLeaseExpiresAtOpen(t *testing.T) {
	defer catch(t)
	s, fsys, _ := leaseStore(t)
	id := must(s.Grant(time.Second))
	must(s.PutLease([]byte("a"), []byte("1"), id))
	rev := s.Revision()
	s.Close()
	s2 := reopen(t, fsys, kv.Options{Clock: fakeclock.New(t0.Add(time.Hour))})
	c := collectWatch(t, func(ctx context.Context) kvWatch { return s2.Watch(ctx, nil, rev+1) })
	if diff := cmp.Diff([]ev{{Type: "delete", Key: "a", Rev: int64(rev + 1), Prev: "-"}}, c.take(t, 1)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestLeaseReadOnly: a reader cannot commit an expiry, but treats a key
// whose lease's deadline has passed as absent, as the writer does; a
// reader before the deadline sees it.
func TestLeaseReadOnly(t *testing.T) {
	defer catch(t)
	s, fsys, _ := leaseStore(t)
	id := must(s.Grant(10 * time.Second))
	must(s.PutLease([]byte("a"), []byte("1"), id))
	must(s.Put([]byte("b"), []byte("1")))
	s.Close()
	for _, tc := range []struct {
		at   time.Duration
		want map[string]string
	}{
		{9 * time.Second, map[string]string{"a": "1", "b": "1"}},
		{10 * time.Second, map[string]string{"b": "1"}},
	} {
		r := reopen(t, fsys, kv.Options{ReadOnly: true, Clock: fakeclock.New(t0.Add(tc.at))})
		if diff := cmp.Diff(tc.want, dumpStore(r)); diff != "" {
			t.Errorf("read-only at t0+%v (-want +got):\n%s", tc.at, diff)
		}
		_, err := r.Get([]byte("a"))
		if _, ok := tc.want["a"]; ok != (err == nil) {
			t.Errorf("read-only Get at t0+%v: %v", tc.at, err)
		}
		if n := len(leaseKeys(t, r)); n != len(tc.want)-1 {
			t.Errorf("read-only at t0+%v: %d leases listed", tc.at, n)
		}
		if _, err := r.KeepAlive(id); !errors.Is(err, kv.ErrReadOnly) {
			t.Errorf("KeepAlive on a read-only store: %v", err)
		}
		r.Close()
	}
}

// TestLeaseCheckpoint: a checkpoint carries the leases into a version 2
// snapshot, and the store reopened from it has them, deadlines and keys.
func TestLeaseCheckpoint(t *testing.T) {
	defer catch(t)
	s, fsys, _ := leaseStore(t)
	id := must(s.Grant(time.Minute))
	must(s.PutLease([]byte("a"), []byte("1"), id))
	must(s.Grant(time.Hour))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	meta, err := readMeta(fsys, "/data")
	if err != nil || meta.Leases != 2 {
		t.Fatalf("snapshot meta %+v, %v; want 2 leases", meta, err)
	}
	want := must(s.Leases())
	s.Close()
	s2 := reopen(t, fsys.CrashClone(), kv.Options{Clock: fakeclock.New(t0)})
	if diff := cmp.Diff(want, must(s2.Leases())); diff != "" {
		t.Errorf("leases after a reopen from the snapshot (-before +after):\n%s", diff)
	}
}

// TestKeepAliveLoop: the loop renews a third of the TTL apart, on the
// store's clock, keeping the keys past many TTLs; it ends with the
// lease's error once revoked, and with ctx's when cancelled.
func TestKeepAliveLoop(t *testing.T) {
	defer catch(t)
	s, _, clk := leaseStore(t)
	id := must(s.Grant(3 * time.Second))
	must(s.PutLease([]byte("k"), []byte("v"), id))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.KeepAliveLoop(ctx, id) }()
	// Each step: once the loop has renewed (the deadline is 3 s ahead)
	// and waits on the clock for a second more, move the clock 1.5 s on,
	// which fires the loop's wait. (The steps keep the loop's waits at
	// other instants than the store's expiry timers, 3 s after each
	// renewal.)
	const step = 1500 * time.Millisecond
	for i := range 10 {
		now := t0.Add(time.Duration(i) * step)
		eventually(t, func() bool {
			info, err := s.Lease(id)
			return err == nil && info.Deadline.Equal(now.Add(3*time.Second)) && clk.WaitingAt(now.Add(time.Second))
		})
		clk.Advance(step)
	}
	end := t0.Add(10 * step)
	eventually(t, func() bool {
		info, err := s.Lease(id)
		return err == nil && info.Deadline.Equal(end.Add(3*time.Second))
	})
	if _, err := s.Get([]byte("k")); err != nil {
		t.Errorf("after 15 s of a 3 s lease kept alive: %v", err)
	}
	must(s.Revoke(id))
	eventually(t, func() bool { return clk.WaitingAt(end.Add(time.Second)) })
	clk.Advance(time.Second)
	if err := <-done; !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Errorf("the loop after a revoke: %v", err)
	}
	id2 := must(s.Grant(3 * time.Second))
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- s.KeepAliveLoop(ctx2, id2) }()
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the loop after its ctx ended: %v", err)
	}
}

// TestLeaseFailStop: a lease operation after a failed sync is ErrFailed,
// and the reopened store holds the leases acknowledged before.
func TestLeaseIDsNeverReused(t *testing.T) {
	defer catch(t)
	s, fsys, _ := leaseStore(t)
	id := must(s.Grant(time.Second))
	must(s.Revoke(id))
	s.Close()
	s2 := reopen(t, fsys, kv.Options{Clock: fakeclock.New(t0)})
	id2 := must(s2.Grant(time.Second))
	if id2 <= id || record.Revision(id2) != s2.Revision() {
		t.Errorf("lease id %d after %d was revoked and the store reopened; want a new id, the grant's revision %d", id2, id, s2.Revision())
	}
}

// TestLeaseExpiredAtClose: a store closed after a deadline passed has
// committed the expiry, even when its timer never fired and no write
// came: the next open finds the keys deleted in the log.
func TestLeaseExpiredAtClose(t *testing.T) {
	defer catch(t)
	clk := fakeclock.New(t0)
	s, fsys := memStore(t, &kv.Options{Clock: stuckClock{clk}})
	id := must(s.Grant(time.Second))
	rev := must(s.PutLease([]byte("a"), []byte("1"), id))
	clk.Advance(time.Second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := reopen(t, fsys, kv.Options{ReadOnly: true, Clock: fakeclock.New(t0)})
	if r.Revision() != rev+1 || len(dumpStore(r)) != 0 || len(leaseKeys(t, r)) != 0 {
		t.Errorf("after Close past the deadline: revision %d (want %d), map %v, leases %v", r.Revision(), rev+1, dumpStore(r), leaseKeys(t, r))
	}
}
