package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestStatBesideLiveWriter: bytes past the newest segment's last whole
// record are a write in flight while a writer holds the directory, and
// stat says "being written by process P", not "torn tail"; once no
// process holds it, the same bytes are a torn tail.
func TestStatBesideLiveWriter(t *testing.T) {
	if !vfs.NamesLockHolders(vfs.OS) {
		t.Skip("the OS does not name a lock's holder: stat cannot tell a live writer")
	}
	dir := filepath.Join(t.TempDir(), "data")
	s, err := kv.Open(dir, &kv.Options{NoPreallocate: true})
	if err != nil {
		t.Fatal(err)
	}
	// A put, then a larger one cut in the middle, as a reader sees a
	// record being written: its first bytes, the rest not yet there.
	names, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segment: %v", err)
	}
	seg := names[len(names)-1]
	size := func() int64 {
		t.Helper()
		if err := s.Sync(); err != nil { // and marked: the writer is idle
			t.Fatal(err)
		}
		fi, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if _, err := s.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	start := size()
	if _, err := s.Put([]byte("k2"), []byte(strings.Repeat("v", 4096))); err != nil {
		t.Fatal(err)
	}
	if end := size(); end < start+200 {
		t.Fatalf("the second put ends at %d, from %d", end, start)
	}
	if err := os.Truncate(seg, start+100); err != nil {
		t.Fatal(err)
	}
	flight, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := kvRun(t, "", dir, "stat")
	if want := fmt.Sprintf("being written by process %d", os.Getpid()); code != 0 || !strings.Contains(stdout, want) || strings.Contains(stdout, "torn") {
		t.Errorf("stat beside the writer: exit %d, %q, %q; want %q", code, stdout, stderr, want)
	}
	s.Close()
	// The same bytes, with no process holding the directory.
	if err := os.WriteFile(seg, flight, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = kvRun(t, "", dir, "stat")
	if code != 0 || !strings.Contains(stdout, "torn tail at") || strings.Contains(stdout, "being written") {
		t.Errorf("stat with no writer: exit %d, %q, %q; want a torn tail", code, stdout, stderr)
	}
}
