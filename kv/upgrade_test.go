package kv_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
)

// TestOpenVersion4Image opens a directory that the build before image
// format version 5 wrote (testdata/v4store, by kv at 13599fd: put alpha,
// beta and a 5,000-byte big, which takes a block of several pages, add
// counter 41, checkpoint, then put after-ckpt and delete beta in the log).
// The store serves the version 4 snapshot with the log over it; its
// next checkpoint writes version 5, and the directory reopens to the
// same map. A build that read only version 5 would fail here.
func TestOpenVersion4Image(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"KVSTORE", "log.000002", snapshot.Name} {
		b, err := os.ReadFile(filepath.Join("testdata", "v4store", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"after-ckpt": "3", "alpha": "1", "big": strings.Repeat("x", 5000), "counter": "41"}
	if v := snapshotVersion(t, dir); v != image.VersionBlockNumbered {
		t.Fatalf("testdata/v4store holds a snapshot of version %d, want %d", v, image.VersionBlockNumbered)
	}
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkMap(t, "opened", s, want)
	if _, err := s.Put([]byte("gamma"), []byte("4")); err != nil {
		t.Fatal(err)
	}
	want["gamma"] = "4"
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if v := snapshotVersion(t, dir); v != image.Version {
		t.Errorf("the checkpoint wrote a snapshot of version %d, want %d", v, image.Version)
	}
	checkMap(t, "after the checkpoint", s, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkMap(t, "reopened", s, want)
}

func snapshotVersion(t *testing.T, dir string) uint16 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, snapshot.Name))
	if err != nil || len(b) < 8 {
		t.Fatalf("snapshot: %d bytes, %v", len(b), err)
	}
	return binary.LittleEndian.Uint16(b[6:])
}

// checkMap checks that s holds exactly want, by a Scan and a Get of each
// key.
func checkMap(t *testing.T, when string, s *kv.Store, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for e := range s.Scan(nil, nil) {
		got[string(e.Key)] = string(e.Value)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s: the map by Scan (-want +got):\n%s", when, d)
	}
	for k, v := range want {
		if e, err := s.Get([]byte(k)); err != nil || string(e.Value) != v {
			t.Errorf("%s: Get(%q): %d bytes, %v", when, k, len(e.Value), err)
		}
	}
}
