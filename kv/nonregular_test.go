package kv_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// osEntries describes every entry of dir but LOCK without following
// symbolic links: a regular file by its bytes, anything else by its kind
// (and a symbolic link by its target).
func osEntries(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.Name() == kv.LockName {
			continue
		}
		p := filepath.Join(dir, e.Name())
		switch t := e.Type(); {
		case t.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			out[e.Name()] = string(b)
		case t&fs.ModeSymlink != 0:
			dst, err := os.Readlink(p)
			if err != nil {
				tb.Fatal(err)
			}
			out[e.Name()] = "symlink -> " + dst
		default:
			out[e.Name()] = t.String()
		}
	}
	return out
}

// storeFiles writes a store with a few keys in a fresh directory and
// returns it; with checkpoint, the directory holds a snapshot.
func storeFiles(tb testing.TB, checkpoint bool) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "elsewhere")
	s, err := kv.Open(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			tb.Fatal(err)
		}
	}
	if checkpoint {
		if err := s.Checkpoint(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// copyTo copies the regular files of from whose names match into to.
func copyTo(tb testing.TB, from, to string, names ...string) {
	tb.Helper()
	for _, n := range names {
		m, _ := filepath.Glob(filepath.Join(from, n))
		for _, p := range m {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, filepath.Base(p)), b, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// TestNonRegularFilesRefused plants a symbolic link, a FIFO or a directory
// under the name of a segment or of the snapshot, on the real file
// system. Open (read-write and read-only) and recovery.Check must refuse
// the directory at once with vfs.ErrNotRegular naming the file and what
// it is (a directory under a store's name, in a directory without the
// marker: recovery.ErrNotDataDir, as kv run in the wrong place), change no file in it but LOCK, and leave the target of a link
// byte for byte as it was: recovery used to read a linked file as a torn
// segment and cut it, or append to a linked segment.
func TestNonRegularFilesRefused(t *testing.T) {
	tests := []struct {
		name string
		file string // the name planted
		kind string
		// plant fills dir, and returns the directory a link points into
		// ("" if none).
		plant func(t *testing.T, dir string) (outside string)
		// link, if set, is the file in outside that file is made a
		// symbolic link to.
		link string
		// notDataDir: the directory is no store (recovery.ErrNotDataDir)
		// rather than a store with a file that is not regular.
		notDataDir bool
	}{
		{name: "symlink log.000001 to a file outside", file: "log.000001", kind: "symbolic link", link: "notes.txt",
			plant: func(t *testing.T, dir string) string {
				out := t.TempDir()
				target := filepath.Join(out, "notes.txt")
				if err := os.WriteFile(target, []byte("precious: not a segment\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				return out
			}},
		{name: "symlink log.000001 to a segment outside", file: "log.000001", kind: "symbolic link", link: "log.000001",
			plant: func(t *testing.T, dir string) string { return storeFiles(t, false) }},
		{name: "FIFO log.000001", file: "log.000001", kind: "FIFO",
			plant: func(t *testing.T, dir string) string {
				if err := syscall.Mkfifo(filepath.Join(dir, "log.000001"), 0o600); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "directory log.000001", file: "log.000001", kind: "directory", notDataDir: true,
			plant: func(t *testing.T, dir string) string {
				if err := os.Mkdir(filepath.Join(dir, "log.000001"), 0o700); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "symlink snapshot to a snapshot outside", file: "snapshot", kind: "symbolic link", link: "snapshot",
			plant: func(t *testing.T, dir string) string {
				out := storeFiles(t, true)
				copyTo(t, out, dir, "log.*")
				return out
			}},
		{name: "FIFO snapshot", file: "snapshot", kind: "FIFO",
			plant: func(t *testing.T, dir string) string {
				out := storeFiles(t, true)
				copyTo(t, out, dir, "log.*")
				if err := syscall.Mkfifo(filepath.Join(dir, "snapshot"), 0o600); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
	}
	opens := []struct {
		name string
		open func(dir string) error
	}{
		{"kv.Open", func(dir string) error {
			s, err := kv.Open(dir, nil)
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"kv.Open read-only", func(dir string) error {
			s, err := kv.Open(dir, &kv.Options{ReadOnly: true})
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"recovery.Check", func(dir string) error {
			_, err := recovery.Check(vfs.OS, dir)
			return err
		}},
	}
	for _, tc := range tests {
		for _, o := range opens {
			t.Run(tc.name+"/"+o.name, func(t *testing.T) {
				dir := t.TempDir()
				outside := tc.plant(t, dir)
				name := filepath.Join(dir, tc.file)
				if tc.link != "" {
					if err := os.Symlink(filepath.Join(outside, tc.link), name); err != nil {
						t.Fatal(err)
					}
				}
				before := osEntries(t, dir)
				var outBefore map[string]string
				if outside != "" {
					outBefore = osEntries(t, outside)
				}

				done := make(chan error, 1)
				go func() { done <- o.open(dir) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(5 * time.Second):
					// Let the blocked open of the FIFO return.
					if w, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
					t.Fatalf("%s blocked on the %s %s", o.name, tc.kind, name)
				}
				switch {
				case err == nil:
					t.Errorf("%s accepted a directory with a %s named %s", o.name, tc.kind, tc.file)
				case tc.notDataDir:
					if !errors.Is(err, recovery.ErrNotDataDir) || !strings.Contains(err.Error(), `"`+tc.file+`"`) {
						t.Errorf("%s: %v, want an error matching recovery.ErrNotDataDir naming %s", o.name, err, tc.file)
					}
				case !errors.Is(err, vfs.ErrNotRegular):
					t.Errorf("%s: %v, want an error matching vfs.ErrNotRegular", o.name, err)
				case !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tc.kind):
					t.Errorf("%s: %v, want an error naming %s and saying it is a %s", o.name, err, name, tc.kind)
				}
				if d := cmp.Diff(before, osEntries(t, dir)); d != "" {
					t.Errorf("%s changed the directory (-before +after):\n%s", o.name, d)
				}
				if outside != "" {
					if d := cmp.Diff(outBefore, osEntries(t, outside)); d != "" {
						t.Errorf("%s changed the files the link points into (-before +after):\n%s", o.name, d)
					}
				}
			})
		}
	}
}
