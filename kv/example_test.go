package kv_test

import (
	"errors"
	"fmt"
	"log"
	"os"

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

	// A holder acquires a lock by creating its key; the revision that
	// created it is the fencing token.
	token, _ := s.Put([]byte("lock/shard-7"), []byte("runner-a"))
	a := s.Fenced(kv.Fence{Key: []byte("lock/shard-7"), Token: token})
	a.Put([]byte("shard-7/reply"), []byte("from a"))

	// The lock passes to runner b: the key is deleted and created anew.
	s.Delete([]byte("lock/shard-7"))
	s.Put([]byte("lock/shard-7"), []byte("runner-b"))

	// Runner a does not know yet; its write is refused.
	_, err := a.Put([]byte("shard-7/reply"), []byte("stale write from a"))
	fmt.Println(errors.Is(err, kv.ErrFenced))
	e, _ := s.Get([]byte("shard-7/reply"))
	fmt.Println(string(e.Value))
	// Output:
	// true
	// from a
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
