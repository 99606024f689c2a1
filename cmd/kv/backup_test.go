package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
)

// TestBackupBesideWriter: kv DIR backup beside a writer that keeps the
// directory open in this process takes no lock from it: it backs up what
// the writer has made durable and marked, and the writer goes on
// writing; the backup restores to the writer's map at that revision.
func TestBackupBesideWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Put([]byte(k), []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil { // marks the log: a reader sees the last group
		t.Fatal(err)
	}
	want, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "b")
	code, stdout, stderr := kvRun(t, "", dir, "backup", file)
	if code != 0 || !strings.HasPrefix(stdout, "backup at revision 3: 3 keys, 0 leases, hash "+want.Hash.String()) {
		t.Fatalf("backup beside a writer: exit %d, %q, %q; want revision 3, hash %s", code, stdout, stderr, want.Hash)
	}
	if rev, err := s.Put([]byte("d"), []byte("after")); err != nil || rev != 4 {
		t.Fatalf("the writer after the backup: %d, %v", rev, err)
	}
	if err := s.Sync(); err != nil { // the mark that shows d to a reader beside the writer
		t.Fatal(err)
	}
	// The writer's map is no longer the backup's; a restore of it is.
	code, _, stderr = kvRun(t, "", dir, "verify", "--against", file)
	if code != kvcli.ExitDiffers || !strings.Contains(stderr, "at key d: in the store, not in the backup") {
		t.Errorf("verify of the moved-on store: exit %d, %q", code, stderr)
	}
	restored := filepath.Join(t.TempDir(), "r")
	if code, _, stderr := kvRun(t, "", "restore", file, restored); code != 0 {
		t.Fatalf("restore: exit %d, %q", code, stderr)
	}
	r, err := kv.Open(restored, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.Hash(); err != nil || got != want {
		t.Errorf("restored: %+v, %v; want %+v", got, err, want)
	}
}
