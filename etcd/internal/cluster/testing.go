package cluster

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// startTimeout bounds a test cluster's start.
const startTimeout = time.Minute

// ForTest starts a 3-member cluster of bin in t's temporary directory,
// stopped when t ends.
func ForTest(t testing.TB, bin string) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, Config{Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// ClientForTest returns a client of c, closed when t ends.
func ClientForTest(t testing.TB, c *Cluster) *clientv3.Client {
	t.Helper()
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
