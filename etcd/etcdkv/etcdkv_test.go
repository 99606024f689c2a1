package etcdkv_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/kvapi"
	"github.com/kvstore/kv/kvapi/kvapitest"
)

var memberBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdmember")
	if err != nil {
		panic(err)
	}
	memberBin, err = cluster.BuildMember(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestConformance runs kvapitest's suite on a 3-member cluster. Its
// compaction is etcd's, at the current revision, waiting for the
// members to apply it (WithCompactPhysical).
func TestConformance(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	kvapitest.Run(t, func(t *testing.T) kvapi.KV { return etcdkv.New(cl, nil) },
		kvapitest.Compact(func(t *testing.T, db kvapi.KV) kvapi.KV {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := cl.Get(ctx, "compact")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				t.Fatal(err)
			}
			return db
		}))
}

// TestExample runs Example's body on a cluster of the tests.
func TestExample(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	example(etcdkv.New(cluster.ClientForTest(t, c), nil))
}
