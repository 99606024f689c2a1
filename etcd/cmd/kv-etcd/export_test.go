package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/internal/cluster"
)

// TestExportRoundTrip copies a store to a cluster and the cluster to a
// new store, and compares the three maps; a second copy into either is
// refused, writing nothing, unless --overwrite; a leased key keeps a
// lease with the time it had left; the lock library's keys stay behind.
func TestExportRoundTrip(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	etcd := []string{"--etcd", strings.Join(c.Endpoints(), ",")}
	dirA := filepath.Join(t.TempDir(), "a")
	dirB := filepath.Join(t.TempDir(), "b")
	ops := "put k1 v1\nput k2 two\nadd n 5\nadd n -2\nput \"sp ace\" \"a\\nb\"\nput gone x\ndel gone\nput filelock/job/slot/0 holder\n"
	for i := range 250 { // more than two batches
		ops += "put many/" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "/" + time.Duration(i).String() + " v\n"
	}
	mustKV(t, ops, dirA, "load")
	mustKV(t, "", dirA, "put", "session", "alice", "--ttl", "1h")
	wantDump := mustKV(t, "", dirA, "dump")
	wantDump = strings.Replace(wantDump, "filelock/job/slot/0=holder\n", "", 1)

	out := mustKV(t, "", dirA, "export", "--to-etcd", strings.Join(c.Endpoints(), ","), "--batch", "100")
	for _, want := range []string{"exported 255 keys in 3 transactions", "1 lease granted anew", "1 key of lock holders"} {
		if !strings.Contains(out, want) {
			t.Errorf("export --to-etcd said:\n%s\nwant %q in it", out, want)
		}
	}
	if d := cmp.Diff(wantDump, mustKV(t, "", append(etcd, "dump")...)); d != "" {
		t.Errorf("the cluster's keys (-store +cluster):\n%s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "session")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("session on the cluster: %v, %v; want it bound to a lease", resp, err)
	}
	ttl, err := cl.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.TTL < 3500 || ttl.TTL > 3600 {
		t.Errorf("session's lease on the cluster has %v s left (%v), want about an hour", ttl.TTL, err)
	}
	before := resp.Header.Revision

	r := runKV(t, "", nil, dirA, "export", "--to-etcd", strings.Join(c.Endpoints(), ","))
	if r.code != 1 || !strings.Contains(r.stderr, "exist on the cluster already") {
		t.Errorf("a second export --to-etcd: %+v; want exit 1, keys exist", r)
	}
	if resp, err := cl.Get(ctx, "k1"); err != nil || resp.Header.Revision != before {
		t.Errorf("the refused export moved the cluster from revision %d to %v (%v)", before, resp.Header.Revision, err)
	}
	mustKV(t, "", dirA, "export", "--to-etcd", strings.Join(c.Endpoints(), ","), "--overwrite")

	out = mustKV(t, "", append(etcd, "export", "--to-dir", dirB)...)
	if !strings.Contains(out, "exported 255 keys") || !strings.Contains(out, "1 lease granted anew") {
		t.Errorf("export --to-dir said:\n%s", out)
	}
	if d := cmp.Diff(wantDump, mustKV(t, "", dirB, "dump")); d != "" {
		t.Errorf("the store made from the cluster (-first store +second):\n%s", d)
	}
	if leases := mustKV(t, "", dirB, "lease", "list"); !strings.Contains(leases, "session") {
		t.Errorf("session has no lease in the second store:\n%s", leases)
	}
	r = runKV(t, "", nil, append(etcd, "export", "--to-dir", dirB)...)
	if r.code != 1 || !strings.Contains(r.stderr, "exist in "+dirB+" already") {
		t.Errorf("a second export --to-dir: %+v; want exit 1, keys exist", r)
	}
	mustKV(t, "", append(etcd, "export", "--to-dir", dirB, "--overwrite")...)
}

// mustKV runs kv and returns its stdout, failing t unless it exits 0.
func mustKV(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := runKV(t, stdin, nil, args...)
	if r.code != 0 {
		t.Fatalf("kv %q: exit %d\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}
