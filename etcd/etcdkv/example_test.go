package etcdkv_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// The store's API on an etcd cluster. (It needs a cluster at the
// endpoints, so it is compiled but not run: TestExample runs its body on
// the tests' cluster.)
func Example() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379", "127.0.0.1:22379", "127.0.0.1:32379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	example(etcdkv.New(cli, nil))
}

func example(db kvapi.KV) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kvapi.Put(ctx, db, []byte("greeting"), []byte("hello")); err != nil {
		log.Fatal(err)
	}
	n, _, err := kvapi.Add(ctx, db, []byte("visits"), 1) // a compare-and-swap on etcd
	if err != nil {
		log.Fatal(err)
	}
	e, err := db.Get(ctx, []byte("greeting"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s=%s visits=%d\n", e.Key, e.Value, n)
	res, err := db.Txn(ctx, kv.Txn{
		If:   []kv.Compare{kv.Absent([]byte("leader"))},
		Then: []kv.Op{kv.PutOp([]byte("leader"), []byte("node-1"))},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-1 leads:", res.Succeeded)
}
