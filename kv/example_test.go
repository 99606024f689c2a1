package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kvstore/kv/kv"
)

func tempDir() string {
	dir, err := os.MkdirTemp("", "kv-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

func Example() {
	dir := tempDir()
	defer os.RemoveAll(dir)

	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	rev, err := s.Put([]byte("greeting"), []byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	// Put returned: the write is durable.
	e, err := s.Get([]byte("greeting"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s=%s at revision %d\n", e.Key, e.Value, rev)
	s.Close()

	// Reopening recovers the same state.
	s, _ = kv.Open(dir, nil)
	defer s.Close()
	e, _ = s.Get([]byte("greeting"))
	fmt.Printf("after reopen: %s=%s\n", e.Key, e.Value)
	// Output:
	// greeting=hello at revision 1
	// after reopen: greeting=hello
}

func ExampleStore_Add() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := kv.Open(dir, nil)
	defer s.Close()

	for i := 1; i <= 10; i++ {
		s.Add([]byte("c"), int64(i))
	}
	n, rev, _ := s.Add([]byte("c"), 0)
	fmt.Println("c =", n, "at revision", rev)

	s.Put([]byte("name"), []byte("not a number"))
	_, _, err := s.Add([]byte("name"), 1)
	fmt.Println(errors.Is(err, kv.ErrNotInteger))
	// Output:
	// c = 55 at revision 11
	// true
}

func ExampleStore_Txn() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := kv.Open(dir, nil)
	defer s.Close()

	// Create the key only if it does not exist: a compare-and-set.
	res, _ := s.Txn(kv.Txn{
		If:   []kv.Compare{kv.Absent([]byte("leader"))},
		Then: []kv.Op{kv.PutOp([]byte("leader"), []byte("node-1"))},
	})
	fmt.Println("node-1 elected:", res.Succeeded)

	res, _ = s.Txn(kv.Txn{
		If:   []kv.Compare{kv.Absent([]byte("leader"))},
		Then: []kv.Op{kv.PutOp([]byte("leader"), []byte("node-2"))},
		Else: []kv.Op{kv.AddOp([]byte("lost-elections"), 1)},
	})
	e, _ := s.Get([]byte("leader"))
	fmt.Println("node-2 elected:", res.Succeeded, "- leader is", string(e.Value))
	// Output:
	// node-1 elected: true
	// node-2 elected: false - leader is node-1
}

func ExampleStore_Fenced() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := kv.Open(dir, nil)
	defer s.Close()
	lock := []byte("lock/shard-7")

	// acquire creates the lock key only if it is absent, in one atomic
	// step; the revision that created it is the holder's fencing token. (A
	// plain Put would overwrite another holder's key, keeping its create
	// revision, and so its token, valid.)
	acquire := func(holder string) (kv.Revision, bool) {
		res, err := s.Txn(kv.Txn{
			If:   []kv.Compare{kv.Absent(lock)},
			Then: []kv.Op{kv.PutOp(lock, []byte(holder))},
		})
		return res.Revision, err == nil && res.Succeeded
	}
	// release deletes the lock only while it is still the holder's: a
	// holder that was taken over must not delete its successor's lock.
	release := func(token kv.Revision) bool {
		res, err := s.Txn(kv.Txn{
			If:   []kv.Compare{kv.CompareCreateRev(lock, kv.Equal, token)},
			Then: []kv.Op{kv.DeleteOp(lock)},
		})
		return err == nil && res.Succeeded
	}

	tokenA, _ := acquire("runner-a")
	a := s.Fenced(kv.Fence{Key: lock, Token: tokenA})
	a.Put([]byte("shard-7/reply"), []byte("from a"))
	_, held := acquire("runner-b")
	fmt.Println("b acquires while a holds:", held)

	// Runner a is judged dead and taken over: its lock is deleted and
	// runner b creates it anew.
	s.Delete(lock)
	tokenB, _ := acquire("runner-b")

	// Runner a does not know yet: its write is refused, and so is its
	// release; b's lock is intact.
	_, err := a.Put([]byte("shard-7/reply"), []byte("stale write from a"))
	fmt.Println("a's write fenced:", errors.Is(err, kv.ErrFenced))
	fmt.Println("a releases b's lock:", release(tokenA))
	e, _ := s.Get([]byte("shard-7/reply"))
	fmt.Println(string(e.Value))
	fmt.Println("b releases:", release(tokenB))
	// Output:
	// b acquires while a holds: false
	// a's write fenced: true
	// a releases b's lock: false
	// from a
	// b releases: true
}

// A loop that reads many keys and keeps none passes its buffer back to
// GetAppend: the entries read from the snapshot's image are copied into
// it, and once it is large enough they cost no allocation.
func ExampleStore_GetAppend() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := kv.Open(dir, nil)
	defer s.Close()
	for _, k := range []string{"a", "b", "c"} {
		s.Put([]byte(k), []byte("value of "+k))
	}
	s.Checkpoint() // a, b and c are now read from the image

	var buf []byte
	total := 0
	for _, k := range []string{"a", "b", "c", "missing"} {
		var e kv.Entry
		var err error
		e, buf, err = s.GetAppend(buf[:0], []byte(k))
		if errors.Is(err, kv.ErrNotFound) {
			fmt.Printf("%s: not found\n", k)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		// e is valid until buf is reused, by the next call.
		fmt.Printf("%s=%s\n", e.Key, e.Value)
		total += len(e.Value)
	}
	fmt.Println(total, "bytes read")
	// Output:
	// a=value of a
	// b=value of b
	// c=value of c
	// missing: not found
	// 30 bytes read
}

func ExampleStore_ScanPrefix() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := kv.Open(dir, nil)
	defer s.Close()

	for _, k := range []string{"user/3", "user/1", "group/1", "user/2"} {
		s.Put([]byte(k), []byte("x"))
	}
	for e := range s.ScanPrefix([]byte("user/")) {
		fmt.Println(string(e.Key))
	}
	// Output:
	// user/1
	// user/2
	// user/3
}

func ExampleStore_ScanErr() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := kv.Open(dir, nil)

	for _, k := range []string{"b", "a"} {
		s.Put([]byte(k), []byte("x"))
	}
	keys := func() ([]string, error) {
		var keys []string
		for e, err := range s.ScanErr(nil, nil) {
			if err != nil {
				return keys, err
			}
			keys = append(keys, string(e.Key))
		}
		return keys, nil
	}
	fmt.Println(keys())
	s.Close()
	// Scan would yield nothing here; ScanErr says why.
	fmt.Println(keys())
	// Output:
	// [a b] <nil>
	// [] kv: store closed
}

// A watch yields every durable change under a prefix, in revision
// order; here it waits for the release of a lock key.
func ExampleStore_Watch() {
	dir, _ := os.MkdirTemp("", "kv-example")
	defer os.RemoveAll(dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	rev, _ := s.Put([]byte("locks/a"), []byte("pid 42"))

	go s.Delete([]byte("locks/a")) // the holder releases
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ev, err := range s.Watch(ctx, []byte("locks/"), rev+1) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Type, string(ev.Entry.Key), "at revision", ev.Revision())
		break
	}
	// Output: delete locks/a at revision 2
}
