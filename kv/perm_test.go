package kv_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/snapshot"
)

// TestPermissions checks that Open creates the data directory 0700 and
// every file 0600 (log segments, snapshot, LOCK), and the modes a caller
// asks for through Options.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	tests := []struct {
		name              string
		opts              kv.Options
		wantDir, wantFile os.FileMode
	}{
		{"defaults", kv.Options{}, 0o700, 0o600},
		{"asked for", kv.Options{DirMode: 0o750, FileMode: 0o640}, 0o750, 0o640},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new", "data")
			opts := tc.opts
			opts.SegmentSize = 256
			s, err := kv.Open(dir, &opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if _, _, err := s.Add([]byte("c"), int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{dir, filepath.Dir(dir)} {
				fi, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != tc.wantDir {
					t.Errorf("directory %s: mode %v, want %v", d, got, tc.wantDir)
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, e := range ents {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				seen[e.Name()[:min(4, len(e.Name()))]] = true
				if got := fi.Mode().Perm(); got != tc.wantFile {
					t.Errorf("%s: mode %v, want %v", e.Name(), got, tc.wantFile)
				}
			}
			if !seen["LOCK"] || !seen["log."] || !seen["snap"] {
				t.Errorf("files checked: %v, want LOCK, segments and the snapshot", ents)
			}
		})
	}
}

// TestSnapshotTmpSymlink plants snapshot.tmp as a symbolic link to a file
// outside the data directory, then checkpoints, and plants it again and
// recovers: the target is never written or removed, and the link is gone
// (removed, not followed; the new snapshot.tmp is created with O_EXCL).
func TestSnapshotTmpSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	const content = "not the store's to touch"
	if err := os.WriteFile(target, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, snapshot.TmpName)
	plant := func() {
		t.Helper()
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(target); err != nil || string(b) != content {
			t.Errorf("%s: the link's target holds %q, %v", when, b, err)
		}
		if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
			t.Errorf("%s: %s still there (%v)", when, snapshot.TmpName, err)
		}
		fi, err := os.Lstat(filepath.Join(dir, snapshot.Name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: snapshot is not a regular file: %v %v", when, fi, err)
		}
	}

	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	plant()
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	if _, err := s.Put([]byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Recovery with something to replay (it checkpoints) and with nothing.
	for _, round := range []string{"a recovery that checkpoints", "a recovery with nothing to replay"} {
		plant()
		s, err := kv.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e, err := s.Get([]byte("k")); err != nil || string(e.Value) != "v2" {
			t.Errorf("%s: k = %q, %v", round, e.Value, err)
		}
		s.Close()
		check("after " + round)
	}
}
