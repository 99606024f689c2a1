package kv_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kvstore/kv/kv"
)

// A key bound to a lease is deleted when the lease ends: here by Revoke;
// otherwise at its deadline, unless KeepAlive moves it on.
func ExampleStore_Grant() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	id, err := s.Grant(time.Minute) // the lease's id is its grant's revision
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.PutLease([]byte("session/42"), []byte("alice"), id); err != nil {
		log.Fatal(err)
	}
	info, err := s.Lease(id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("lease %d, TTL %v, keys %q\n", info.ID, info.TTL, info.Keys)

	rev, err := s.Revoke(id)
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.Get([]byte("session/42"))
	fmt.Printf("revoked at revision %d: %v\n", rev, errors.Is(err, kv.ErrNotFound))
	_, err = s.KeepAlive(id)
	fmt.Println(errors.Is(err, kv.ErrLeaseNotFound))
	// Output:
	// lease 1, TTL 1m0s, keys ["session/42"]
	// revoked at revision 3: true
	// true
}
