package kv_test

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// osTree returns every file under dir on the OS with its bytes, LOCK
// included, and directories as "<dir>".
func osTree(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() {
			out[rel] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		tb.Fatal(err)
	}
	return out
}

// TestOpenNotDataDir: Open on a directory that holds files and is not a
// store refuses it, writable, read-only or not allowed to create, with
// ErrNotDataDir naming it, and changes nothing: no LOCK, no segment, no
// byte of a file under a segment's name cut (the text file named
// log.000001, and its folder of notes).
func TestOpenNotDataDir(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"a text file named log.000001", map[string]string{"log.000001": "hello world this is a note\nline two of my notes\n"}},
		{"a short text file named log.000001", map[string]string{"log.000001": "x\n"}},
		{"a folder of notes", map[string]string{"todo.txt": "buy milk\n", "ideas.md": "# ideas\n"}},
		{"notes and a LOCK an old kv left", map[string]string{"todo.txt": "buy milk\n", "LOCK": "4242\n"}},
		{"a photo named snapshot", map[string]string{"snapshot": "\xff\xd8\xff\xe0 JFIF"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := osTree(t, dir)
			for _, opts := range []kv.Options{{}, {ReadOnly: true}, {NoCreate: true}} {
				s, err := kv.Open(dir, &opts)
				if err == nil {
					s.Close()
					t.Fatalf("%+v: opened", opts)
				}
				var nd *recovery.NotDataDirError
				if !errors.Is(err, kv.ErrNotDataDir) || !errors.As(err, &nd) || nd.Dir != dir {
					t.Fatalf("%+v: %v, want ErrNotDataDir naming %s", opts, err, dir)
				}
				if !strings.HasPrefix(err.Error(), "not a kv data directory: "+dir) {
					t.Errorf("message %q", err)
				}
				if diff := cmp.Diff(before, osTree(t, dir)); diff != "" {
					t.Fatalf("%+v: the directory changed (-before +after):\n%s", opts, diff)
				}
			}
		})
	}
}

// TestOpenForeignBytesInStore: in a store, bytes the store never wrote at
// the end of its newest segment are refused as corruption naming the file
// and offset, never cut as a torn tail: a crash leaves zeros or the
// store's own bytes, not text.
func TestOpenForeignBytesInStore(t *testing.T) {
	dir := t.TempDir()
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	end := s.Stats().Segment
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, wal.SegmentName(end))
	b, _ := os.ReadFile(seg)
	z := strings.TrimRight(string(b), "\x00")
	text := z + "these are my notes, appended by hand\n"
	if err := os.WriteFile(seg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	before := osTree(t, dir)
	_, err = kv.Open(dir, nil)
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || ce.File != seg || ce.Offset != int64(len(z)) {
		t.Fatalf("open: %v, want corruption at %s offset %d", err, seg, len(z))
	}
	after := osTree(t, dir)
	delete(before, kv.LockName)
	delete(after, kv.LockName)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("the directory changed (-before +after):\n%s", diff)
	}
}

// TestOpenNoCreate: NoCreate and ReadOnly refuse a missing or empty
// directory with ErrNoStore and create nothing; a plain Open creates the
// store, directory and parents included.
func TestOpenNoCreate(t *testing.T) {
	for _, opts := range []kv.Options{{NoCreate: true}, {ReadOnly: true}} {
		root := t.TempDir()
		empty := filepath.Join(root, "empty")
		if err := os.Mkdir(empty, 0o700); err != nil {
			t.Fatal(err)
		}
		missing := filepath.Join(root, "a", "b", "data")
		for _, dir := range []string{empty, missing} {
			_, err := kv.Open(dir, &opts)
			var ns *recovery.NoStoreError
			if !errors.Is(err, kv.ErrNoStore) || !errors.As(err, &ns) || ns.Dir != dir || ns.Missing != (dir == missing) {
				t.Errorf("%+v on %s: %v, want ErrNoStore", opts, dir, err)
			}
		}
		if diff := cmp.Diff(map[string]string{".": "<dir>", "empty": "<dir>"}, osTree(t, root)); diff != "" {
			t.Errorf("%+v: created (-want +got):\n%s", opts, diff)
		}
	}
	dir := filepath.Join(t.TempDir(), "a", "data")
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if k, err := recovery.Identify(vfs.OS, dir); k != recovery.DirMarked || err != nil {
		t.Errorf("after a creating Open: %v, %v", k, err)
	}
	s, err = kv.Open(dir, &kv.Options{NoCreate: true})
	if err != nil {
		t.Fatalf("NoCreate on a store: %v", err)
	}
	s.Close()
}

// noSpaceFrom returns a rule that fails, from the k-th operation that
// changes files on, every operation that needs space (create, write,
// preallocate, mkdir, sync) with ENOSPC, as a full disk does; removals
// and renames still work.
func noSpaceFrom(k int) func(vfs.Op) error {
	n := 0
	return func(op vfs.Op) error {
		if op.Kind.Mutates() {
			n++
		}
		if n < k {
			return nil
		}
		switch op.Kind {
		case vfs.OpCreate, vfs.OpWrite, vfs.OpPreallocate, vfs.OpMkdir, vfs.OpSync, vfs.OpDirSync:
			return syscall.ENOSPC
		}
		return nil
	}
}

// TestFailedCreateLeavesDirAsFound: a disk that fills at each operation of
// an Open that creates a store (in a missing directory with missing
// parents, and in an empty one) leaves the directory as it found it, and
// the error says what to do.
func TestFailedCreateLeavesDirAsFound(t *testing.T) {
	for _, dir := range []string{"/data", "/x/y/data"} {
		for k := 1; ; k++ {
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/data", 0o700); err != nil {
				t.Fatal(err)
			}
			before := memTree(t, mem, "/")
			s, err := kv.Open(dir, &kv.Options{FS: &vfs.Inject{FS: mem, Rule: noSpaceFrom(k)}})
			if err == nil {
				s.Close()
				if k == 1 {
					t.Fatalf("%s: the open succeeded on a full disk", dir)
				}
				t.Logf("%s: %d operations", dir, k-1)
				break
			}
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "is full: free some space") {
				t.Errorf("%s, disk full at operation %d: %v, want ENOSPC and what to do", dir, k, err)
			}
			if diff := cmp.Diff(before, memTree(t, mem, "/")); diff != "" {
				t.Fatalf("%s, disk full at operation %d (%v): the failed open left (-before +after):\n%s", dir, k, err, diff)
			}
		}
	}
}

// memTree returns every file and directory under dir in mem.
func memTree(tb testing.TB, mem *vfs.MemFS, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	var walk func(string)
	walk = func(d string) {
		names, err := mem.List(d)
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range names {
			p := path.Join(d, n)
			if fi, err := mem.Stat(p); err == nil && fi.IsDir() {
				out[p] = "<dir>"
				walk(p)
				continue
			}
			b, err := vfs.ReadFile(mem, p)
			if err != nil {
				tb.Fatal(err)
			}
			out[p] = string(b)
		}
	}
	walk(dir)
	return out
}
