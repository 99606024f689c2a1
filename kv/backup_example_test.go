package kv_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvstore/kv/kv"
)

func ExampleStore_Backup() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, err := kv.Open(filepath.Join(dir, "data"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Put([]byte("a"), []byte("1"))
	s.Put([]byte("b"), []byte("x"))
	s.Put([]byte("a"), []byte("2"))

	// A backup of every key as of one revision; writers could go on.
	name := filepath.Join(dir, "data.kvbackup")
	f, err := os.Create(name)
	if err != nil {
		log.Fatal(err)
	}
	rev, err := s.Backup(f)
	if err == nil {
		err = f.Sync() // Backup neither syncs nor closes f
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("backup at revision", rev)

	// A new directory from it, at the same revision and with the same
	// content hash (FORMAT.md's example map); writes go on above it.
	d, err := kv.Restore(name, filepath.Join(dir, "copy"), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("restored revision %d, %d keys, hash %s\n", d.Revision, d.Keys, d.Hash)
	c, err := kv.Open(filepath.Join(dir, "copy"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	next, _ := c.Put([]byte("c"), []byte("3"))
	fmt.Println("next write at revision", next)
	// Output:
	// backup at revision 3
	// restored revision 3, 2 keys, hash b1fe069354edc487d1abbcc06773b21dbc045c20003c0a9069823cad0220ae38
	// next write at revision 4
}
