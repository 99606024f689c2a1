package kvraft_test

import (
	"fmt"
	"log"
	"os"

	"github.com/hashicorp/raft"
	"github.com/kvstore/kv/kvraft"
)

func Example() {
	dir, err := os.MkdirTemp("", "kvraft-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := kvraft.Open(dir, nil) // raft.NewRaft(conf, fsm, store, store, snaps, trans)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// Raft appends in batches, each one durable transaction...
	if err := store.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("b")},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte("c")},
	}); err != nil {
		log.Fatal(err)
	}
	// ...compacts the front after a snapshot...
	if err := store.DeleteRange(1, 1); err != nil {
		log.Fatal(err)
	}
	// ...and keeps its term and vote in the stable store.
	if err := store.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		log.Fatal(err)
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	var l raft.Log
	err = store.GetLog(1, &l)
	fmt.Println(first, last, err == raft.ErrLogNotFound)
	_, err = store.Get([]byte("LastVoteCand"))
	fmt.Println(err)
	// Output:
	// 2 3 true
	// not found
}
