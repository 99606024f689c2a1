package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
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
	// A port freePort handed out can be taken by another process (the
	// tests of another package start clusters of their own) before the
	// member binds it: that start is tried again, on new ports.
	dir := t.TempDir()
	var c *Cluster
	var err error
	for attempt := 1; ; attempt++ {
		c, err = Start(ctx, Config{Bin: bin, Dir: filepath.Join(dir, fmt.Sprint(attempt))})
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		t.Logf("starting etcd, attempt %d: a port was taken before its member bound it: %v", attempt, err)
	}
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
