package etcdlock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/etcdlock"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/filelock/locktest"
)

var long = flag.Bool("long", false, "run the long lock runs: more holders, rounds and pauses")

var memberBin, holderBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "etcdlock")
	if err != nil {
		panic(err)
	}
	memberBin, err = cluster.BuildMember(dir)
	if err == nil {
		holderBin, err = cluster.Build(dir, "lockholder")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// suiteTTL is the lease of the suite's lockers. A holder is kept only by
// renewals a third of it apart, so it is 5 s, not the cluster's minimum
// of 1 s (its election timeout is 500 ms), whose 667 ms of slack a
// loaded machine's pause can eat: no subtest waits for a lease to run
// out (a killed holder's is revoked), and TestLeaseIsLiveness waits for
// one once.
const suiteTTL = 5 * time.Second

// TestSuite runs the lock library's acceptance suite on a 3-member
// cluster, each subtest on an emptied keyspace.
func TestSuite(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	locktest.Run(t, func(t *testing.T) locktest.Env {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cl.Delete(ctx, "\x00", clientv3.WithFromKey()); err != nil {
			t.Fatal(err)
		}
		b := etcdlock.NewBackend(cl, &etcdlock.Options{TTL: suiteTTL})
		return locktest.Env{
			Backend: b,
			New: func(opts ...filelock.Option) (*filelock.Locker, error) {
				return etcdlock.NewLocker(cl, &etcdlock.Options{TTL: suiteTTL}, opts...)
			},
			NewOn: func(b lockstore.Backend, opts ...filelock.Option) (*filelock.Locker, error) {
				return filelock.NewBackend(b, "", opts...)
			},
			// The holder's process died: its lease ends (a revoke, not
			// an expiry; TestPausedHolder waits for a real one).
			Kill:         func(l *filelock.Locker, _ *filelock.Holder) { l.Close() },
			SelfCleaning: true,
		}
	})
}

// TestLeaseIsLiveness: a holder's key is bound to its locker's lease, a
// LockedError says so, and the key is gone once the lease ends by
// itself (no keep-alive: the process that holds it is paused here by
// closing its client) and the TTL passes, with no one sweeping.
func TestLeaseIsLiveness(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	holderCl := cluster.ClientForTest(t, c)
	l, err := etcdlock.NewLocker(holderCl, &etcdlock.Options{TTL: suiteTTL})
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.TryAcquire("job")
	if err != nil {
		t.Fatal(err)
	}
	if h.Marker().Lease == 0 || h.Marker().HolderFile != "" {
		t.Fatalf("marker %+v: want a lease and no holder file", h.Marker())
	}
	other, err := etcdlock.NewLocker(cl, &etcdlock.Options{TTL: suiteTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.TryAcquire("job")
	le, ok := err.(*filelock.LockedError)
	if !ok || len(le.Holders) != 1 || !le.Holders[0].Alive {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	t.Logf("held: %v", le)
	lost := h.Lost()
	holderCl.Close() // the keep-alives stop
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	h2, err := other.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("taken %v after the keep-alives stopped (TTL %v)", time.Since(start).Round(10*time.Millisecond), suiteTTL)
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after %d", h2.Token(), h.Token())
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after the lease ended")
	}
	h2.Release()
}

// TestLeaseEndedBehindItsBack: a locker whose lease ended before its
// keep-alive noticed (a pause, a revoke by someone else) takes a new
// one on its next acquire, instead of failing.
func TestLeaseEndedBehindItsBack(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	l, err := etcdlock.NewLocker(cl, &etcdlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := l.TryAcquire("a")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.Revoke(ctx, clientv3.LeaseID(h.Marker().Lease)); err != nil {
		t.Fatal(err)
	}
	h2, err := l.TryAcquire("b")
	if err != nil {
		t.Fatalf("acquire after the lease ended: %v", err)
	}
	if h2.Marker().Lease == h.Marker().Lease {
		t.Fatalf("the new holder has the ended lease %x", h.Marker().Lease)
	}
	if err := h.Release(); !errors.Is(err, filelock.ErrLockLost) {
		t.Fatalf("release of the holder whose lease ended: %v, want ErrLockLost", err)
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
}
