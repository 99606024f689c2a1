package etcdkv_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// TestRevisionsAreTheClusters pins down what moves etcd's revision, as
// the package doc states it: an empty cluster is at 1; a lease grant, a
// keep-alive, a compaction and a leader change move nothing; a revoke
// (or expiry) of a lease that has keys commits one revision that
// deletes them all; one without keys commits none.
func TestRevisionsAreTheClusters(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	db := etcdkv.New(cl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rev := func() kv.Revision {
		t.Helper()
		_, r, err := db.Range(ctx, nil, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := rev(); r != 1 {
		t.Fatalf("empty cluster at revision %d, want 1", r)
	}
	r1, err := kvapi.Put(ctx, db, []byte("a"), []byte("1"))
	if err != nil || r1 != 2 {
		t.Fatalf("first put: %d, %v; want revision 2", r1, err)
	}
	lease, err := cl.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if r := rev(); r != r1 {
		t.Errorf("after a lease grant and keep-alive: revision %d, want %d", r, r1)
	}
	for _, k := range []string{"l1", "l2"} {
		if _, err := cl.Put(ctx, k, "x", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Compact(ctx, int64(r1+2)); err != nil {
		t.Fatal(err)
	}
	if r := rev(); r != r1+2 {
		t.Errorf("after two puts and a compaction: revision %d, want %d", r, r1+2)
	}
	if _, err := cl.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if r := rev(); r != r1+3 {
		t.Errorf("after revoking a lease with two keys: revision %d, want %d (one for both)", r, r1+3)
	}
	empty, err := cl.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Revoke(ctx, empty.ID); err != nil {
		t.Fatal(err)
	}
	if r := rev(); r != r1+3 {
		t.Errorf("after revoking a lease without keys: revision %d, want %d", r, r1+3)
	}
	// A leader change: kill the leader, wait for another, restart it.
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Members[l].Kill()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Members[l].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if r := rev(); r != r1+3 {
		t.Errorf("after a leader change: revision %d, want %d", r, r1+3)
	}
}
