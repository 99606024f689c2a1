package kv_test

import (
	"fmt"
	"log"
	"os"

	"github.com/kvstore/kv/kv"
)

// A compare-and-set that reads the current value when it fails, and the
// keys of a prefix when it succeeds, in the same atomic step.
func ExampleStore_Txn_reads() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Put([]byte("config/version"), []byte("7"))
	s.Put([]byte("config/mode"), []byte("fast"))

	res, err := s.Txn(kv.Txn{
		If:       []kv.Compare{kv.CompareValue([]byte("config/version"), kv.Equal, []byte("6"))},
		Then:     []kv.Op{kv.PutOp([]byte("config/version"), []byte("7"))},
		ThenRead: []kv.Read{kv.PrefixRead([]byte("config/"), 0)},
		ElseRead: []kv.Read{kv.GetRead([]byte("config/version"))},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("succeeded:", res.Succeeded)
	for _, e := range res.Reads[0].Entries {
		fmt.Printf("%s=%s\n", e.Key, e.Value)
	}
	// Output:
	// succeeded: false
	// config/version=7
}
