package etcdkv_test

import (
	"fmt"
	"os"
	"testing"

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

// TestConformance runs kvapitest's suite on a 3-member cluster.
func TestConformance(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	kvapitest.Run(t, func(t *testing.T) kvapi.KV { return etcdkv.New(cl, nil) })
}

// TestExample runs Example's body on a cluster of the tests.
func TestExample(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	example(etcdkv.New(cluster.ClientForTest(t, c), nil))
}
