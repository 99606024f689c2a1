package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
)

// TestDumpOfDamagedImageChangesNothing (item 4 of issue 39): on a store
// with a log tail after its image, one flipped byte in a block of the
// image. kv DIR dump, which reads every key, checks the whole image
// before its open writes (kv.Options.VerifyImage): it fails on the block
// and leaves every file as it was, so its "nothing was changed" is true
// (the open used to seal the log and start the next segment first). A
// put whose key is in the block fails after its open: its message says
// that, not "nothing was changed".
func TestDumpOfDamagedImageChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := kv.Open(dir, &kv.Options{CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("key%05d", i) }
	var txn kv.Txn
	for i := range 3000 {
		txn.Then = append(txn.Then, kv.PutOp([]byte(key(i)), []byte(strings.Repeat("v", 40))))
	}
	if _, err := s.Txn(txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Put([]byte(fmt.Sprint("tail", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snapshot")
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(snap, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := hashDir(t, dir)
	code, _, stderr := kvRun(t, "", dir, "dump")
	if code != exitFailed || !strings.Contains(stderr, "corrupt snapshot") || !strings.Contains(stderr, "nothing was changed") {
		t.Fatalf("dump of a damaged image: exit %d, %q", code, stderr)
	}
	if after := hashDir(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the failed dump changed the directory:\nbefore %v\nafter  %v", before, after)
	}
	// The first key the damage hides: the one after the last a scan reads.
	r, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range r.ScanErr([]byte("key"), []byte("kez")) {
		if err != nil {
			break
		}
		n++
	}
	r.Close()
	if n == 3000 {
		t.Fatal("the flipped byte hid no key")
	}
	code, _, stderr = kvRun(t, "", dir, "put", key(n), "new")
	if code != exitFailed || !strings.Contains(stderr, "found after the store was opened") || strings.Contains(stderr, "nothing was changed") {
		t.Fatalf("put of a key in the damaged block: exit %d, %q", code, stderr)
	}
}
