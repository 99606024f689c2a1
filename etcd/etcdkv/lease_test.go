package etcdkv_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// TestLeaseOnEtcd: what etcd's leases do that the store's do not (the
// package doc's list): a TTL is rounded up to whole seconds and to the
// cluster's minimum (1 s on the tests' clusters); a grant, a renewal and
// the revoke of a lease without keys commit no revision; the revoke of
// one with keys commits one, deleting them.
func TestLeaseOnEtcd(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	db := etcdkv.New(cluster.ClientForTest(t, c), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rev := func() kv.Revision {
		_, r, err := db.Range(ctx, []byte("x"), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := rev()
	for _, tc := range []struct{ ttl, want time.Duration }{
		{100 * time.Millisecond, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{time.Minute, time.Minute},
	} {
		info, err := db.Grant(ctx, tc.ttl)
		if err != nil || info.TTL != tc.want {
			t.Errorf("Grant(%v): TTL %v, %v; want %v", tc.ttl, info.TTL, err, tc.want)
		}
		if _, err := db.KeepAlive(ctx, info.ID); err != nil {
			t.Errorf("KeepAlive: %v", err)
		}
		if r, err := db.Revoke(ctx, info.ID); err != nil || r != before {
			t.Errorf("Revoke of a lease without keys: revision %d, %v; want %d, unchanged", r, err, before)
		}
	}
	if got := rev(); got != before {
		t.Errorf("revision %d after grants, renewals and revokes without keys, want %d", got, before)
	}
	info, err := db.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	put, err := kvapi.PutLease(ctx, db, []byte("k"), nil, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := db.Revoke(ctx, info.ID); err != nil || r != put+1 {
		t.Errorf("Revoke of a lease with a key: revision %d, %v; want %d", r, err, put+1)
	}
}
