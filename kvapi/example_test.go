package kvapi_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// Code written against kvapi.KV runs on the embedded store, as here, or
// on an etcd cluster (etcdkv.New) unchanged.
func Example() {
	dir, err := os.MkdirTemp("", "kvapi-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var db kvapi.KV = kvapi.Local(s)
	ctx := context.Background()

	if _, err := kvapi.Put(ctx, db, []byte("user/1"), []byte("ada")); err != nil {
		log.Fatal(err)
	}
	n, _, err := kvapi.Add(ctx, db, []byte("users"), 1)
	if err != nil {
		log.Fatal(err)
	}
	e, err := db.Get(ctx, []byte("user/1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s=%s version %d, users=%d\n", e.Key, e.Value, e.Version, n)

	// Create-if-absent: the second one finds the key and runs Else.
	for _, who := range []string{"node-1", "node-2"} {
		res, err := db.Txn(ctx, kv.Txn{
			If:   []kv.Compare{kv.Absent([]byte("leader"))},
			Then: []kv.Op{kv.PutOp([]byte("leader"), []byte(who))},
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s leads: %v\n", who, res.Succeeded)
	}
	es, _, err := db.Range(ctx, []byte("l"), []byte("m"), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d key in [l, m): %s=%s\n", len(es), es[0].Key, es[0].Value)
	// Output:
	// user/1=ada version 1, users=1
	// node-1 leads: true
	// node-2 leads: false
	// 1 key in [l, m): leader=node-1
}

// A fenced write commits only while the lock key still has the token its
// holder got: once another holder re-creates the key, the old one's
// writes fail with kv.ErrFenced and write nothing.
func ExampleFenced() {
	dir, err := os.MkdirTemp("", "kvapi-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	db, ctx := kvapi.Local(s), context.Background()
	lock := []byte("lock/job")

	token, _ := kvapi.Put(ctx, db, lock, []byte("runner-a")) // the key's create revision
	w := kvapi.Fenced(db, kv.Fence{Key: lock, Token: token})
	_, err = w.Put(ctx, []byte("job/state"), []byte("a was here"))
	fmt.Println("a, holding:", err)

	// runner-b takes the lock over: the key is created anew.
	kvapi.Delete(ctx, db, lock)
	kvapi.Put(ctx, db, lock, []byte("runner-b"))
	_, err = w.Put(ctx, []byte("job/state"), []byte("a, late"))
	fmt.Println("a, taken over:", errors.Is(err, kv.ErrFenced))
	e, _ := db.Get(ctx, []byte("job/state"))
	fmt.Printf("job/state=%s\n", e.Value)
	// Output:
	// a, holding: <nil>
	// a, taken over: true
	// job/state=a was here
}

// Follow a prefix: read it with Range, then watch from the revision the
// Range saw, plus one. No change is missed or seen twice, whenever it
// was made; a watch that fell behind a compaction says so, and the
// reader reads again.
func ExampleKV_watch() {
	dir, err := os.MkdirTemp("", "kvapi-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var db kvapi.KV = kvapi.Local(s)
	ctx := context.Background()
	if _, err := kvapi.Put(ctx, db, []byte("jobs/1"), []byte("queued")); err != nil {
		log.Fatal(err)
	}

	jobs, rev, err := db.Range(ctx, []byte("jobs/"), []byte("jobs0"), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d job at revision %d\n", len(jobs), rev)
	// Changes made after the Range, before the watch starts: the watch
	// from rev+1 yields them.
	kvapi.Put(ctx, db, []byte("jobs/2"), []byte("queued"))
	kvapi.Put(ctx, db, []byte("jobs/1"), []byte("done"))
	kvapi.Delete(ctx, db, []byte("jobs/2"))

	n := 0
	for ev, err := range db.Watch(ctx, []byte("jobs/"), rev+1, &kvapi.WatchOptions{Prev: true}) {
		if errors.Is(err, kv.ErrCompacted) {
			log.Fatal("fell behind: Range again, and watch from its revision + 1")
		}
		if err != nil {
			log.Fatal(err)
		}
		was := "-"
		if ev.Prev != nil {
			was = string(ev.Prev.Value)
		}
		fmt.Printf("%d: %s %s %q (was %s)\n", ev.Revision(), ev.Type, ev.Entry.Key, ev.Entry.Value, was)
		if n++; n == 3 {
			break
		}
	}
	// Output:
	// 1 job at revision 1
	// 2: put jobs/2 "queued" (was -)
	// 3: put jobs/1 "done" (was queued)
	// 4: delete jobs/2 "" (was queued)
}
