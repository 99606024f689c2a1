package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/etcdlock"
	"github.com/kvstore/kv/etcd/internal/cluster"
)

// TestWait: Backend.Wait, what a waiter of the lock library sleeps in,
// returns at a change under its prefix after the revision read, a
// change made before it was called included, and at once when that
// revision is compacted; a change elsewhere does not wake it; ctx's end
// is its error.
func TestWait(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	b := etcdlock.NewBackend(cl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(k string) int64 {
		t.Helper()
		resp, err := cl.Put(ctx, k, "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	wait := func(prefix string, rev int64) <-chan error {
		done := make(chan error, 1)
		go func() { done <- b.Wait(ctx, prefix, rev) }()
		return done
	}
	woke := func(what string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v, want nil", what, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Wait did not return", what)
		}
	}
	asleep := func(what string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s: Wait returned %v", what, err)
		case <-time.After(300 * time.Millisecond):
		}
	}

	rev := put("lock/a")
	done := wait("lock/", rev)
	put("lockx") // shares the bytes "lock", not the prefix "lock/"
	put("other/a")
	asleep("changes under other prefixes", done)
	put("lock/b")
	woke("a change under the prefix", done)

	// A change between the read and the call: Wait from the revision
	// read sees it.
	rev = put("lock/c")
	put("lock/d")
	woke("a change made before the call", wait("lock/", rev))

	// The revision after the one read compacted: a change may be lost.
	rev = put("lock/e")
	last := put("other/b")
	if _, err := cl.Compact(ctx, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	woke("a compacted revision", wait("lock/", rev))

	// ctx's end.
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- b.Wait(wctx, "lock/", last) }()
	asleep("nothing changed", wdone)
	wcancel()
	select {
	case err := <-wdone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after cancel")
	}
}
