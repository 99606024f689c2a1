package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/vfs"
)

// TestConformance runs the same cases on every FS implementation, so that
// the in-memory FS the crash tests use behaves like the real one.
func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, fsys vfs.FS, dir string)
	}{
		{"create existing fails", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("old"))
			f, err := fsys.Create(p)
			if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("Create(existing) = %v, %v; want an error matching fs.ErrExist", f, err)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name %s", err, p)
			}
			if got := readFile(t, fsys, p); got != "old" {
				t.Errorf("contents after failed Create = %q, want %q", got, "old")
			}
		}},
		{"create in missing directory fails", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "nodir", "f")
			if _, err := fsys.Create(p); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Create(%s) error = %v, want fs.ErrNotExist", p, err)
			}
		}},
		{"create starts empty", func(t *testing.T, fsys vfs.FS, dir string) {
			f, err := fsys.Create(path.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != 0 {
				t.Errorf("size of new file = %d, want 0", fi.Size())
			}
		}},
		{"write and read at offsets", func(t *testing.T, fsys vfs.FS, dir string) {
			f, err := fsys.Create(path.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			for _, w := range []struct {
				s   string
				off int64
			}{{"hello", 0}, {"XY", 1}, {"!", 5}} {
				if n, err := f.WriteAt([]byte(w.s), w.off); err != nil || n != len(w.s) {
					t.Fatalf("WriteAt(%q, %d) = %d, %v", w.s, w.off, n, err)
				}
			}
			buf := make([]byte, 6)
			if n, err := f.ReadAt(buf, 0); err != nil || n != 6 {
				t.Fatalf("ReadAt(6, 0) = %d, %v", n, err)
			}
			if diff := cmp.Diff("hXYlo!", string(buf)); diff != "" {
				t.Errorf("contents (-want +got):\n%s", diff)
			}
			buf = make([]byte, 2)
			if n, err := f.ReadAt(buf, 3); err != nil || n != 2 {
				t.Fatalf("ReadAt(2, 3) = %d, %v", n, err)
			}
			if diff := cmp.Diff("lo", string(buf)); diff != "" {
				t.Errorf("ReadAt(2, 3) (-want +got):\n%s", diff)
			}
		}},
		{"sparse extension reads zeros", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			f, err := fsys.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("z"), 100); err != nil {
				t.Fatal(err)
			}
			mustClose(t, f)
			want := strings.Repeat("\x00", 100) + "z"
			if diff := cmp.Diff(want, readFile(t, fsys, p)); diff != "" {
				t.Errorf("contents (-want +got):\n%s", diff)
			}
		}},
		{"read past end returns EOF", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("abc"))
			f, err := fsys.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			buf := make([]byte, 4)
			for _, off := range []int64{3, 4, 1000} {
				if n, err := f.ReadAt(buf, off); n != 0 || err != io.EOF {
					t.Errorf("ReadAt(4, %d) = %d, %v; want 0, io.EOF", off, n, err)
				}
			}
			n, err := f.ReadAt(buf, 1)
			if n != 2 || err != io.EOF {
				t.Errorf("ReadAt(4, 1) = %d, %v; want 2, io.EOF", n, err)
			}
			if got := string(buf[:n]); got != "bc" {
				t.Errorf("ReadAt(4, 1) read %q, want %q", got, "bc")
			}
		}},
		{"truncate shorter and longer", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("hello world"))
			f, err := fsys.OpenReadWrite(p)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			if err := f.Truncate(5); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("hello", readFile(t, fsys, p)); diff != "" {
				t.Errorf("after Truncate(5) (-want +got):\n%s", diff)
			}
			// Growing again must read zeros, not the bytes cut off before.
			if err := f.Truncate(11); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("hello\x00\x00\x00\x00\x00\x00", readFile(t, fsys, p)); diff != "" {
				t.Errorf("after Truncate(11) (-want +got):\n%s", diff)
			}
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, fsys, p); got != "" {
				t.Errorf("after Truncate(0) = %q, want empty", got)
			}
		}},
		{"rename replaces", func(t *testing.T, fsys vfs.FS, dir string) {
			a, b := path.Join(dir, "a"), path.Join(dir, "b")
			writeFile(t, fsys, a, []byte("new"))
			writeFile(t, fsys, b, []byte("old"))
			old, err := fsys.Open(b)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, old)
			if err := fsys.Rename(a, b); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, fsys, b); got != "new" {
				t.Errorf("%s after rename = %q, want %q", b, got, "new")
			}
			if _, err := fsys.Stat(a); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat(%s) after rename: %v, want fs.ErrNotExist", a, err)
			}
			// The replaced file lives on for whoever has it open.
			buf := make([]byte, 3)
			if _, err := old.ReadAt(buf, 0); err != nil || string(buf) != "old" {
				t.Errorf("replaced file read through open handle = %q, %v; want %q", buf, err, "old")
			}
		}},
		{"rename missing fails", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "nope")
			err := fsys.Rename(p, path.Join(dir, "x"))
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p) {
				t.Errorf("Rename(missing) = %v, want fs.ErrNotExist naming %s", err, p)
			}
		}},
		{"remove", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("x"))
			if err := fsys.Remove(p); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat after Remove: %v, want fs.ErrNotExist", err)
			}
			if err := fsys.Remove(p); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p) {
				t.Errorf("second Remove = %v, want fs.ErrNotExist naming %s", err, p)
			}
			// The name is free again: Create makes a new, empty file.
			writeFile(t, fsys, p, nil)
			if got := readFile(t, fsys, p); got != "" {
				t.Errorf("re-created file = %q, want empty", got)
			}
		}},
		{"remove directories", func(t *testing.T, fsys vfs.FS, dir string) {
			sub := path.Join(dir, "sub")
			if err := fsys.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fsys, path.Join(sub, "f"), nil)
			if err := fsys.Remove(sub); err == nil {
				t.Fatal("Remove(non-empty directory) succeeded")
			}
			if err := fsys.Remove(path.Join(sub, "f")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(sub); err != nil {
				t.Fatalf("Remove(empty directory): %v", err)
			}
			if _, err := fsys.Stat(sub); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat(removed directory) = %v, want fs.ErrNotExist", err)
			}
		}},
		{"list is sorted and current", func(t *testing.T, fsys vfs.FS, dir string) {
			list := func() []string {
				t.Helper()
				names, err := fsys.List(dir)
				if err != nil {
					t.Fatal(err)
				}
				return names
			}
			if diff := cmp.Diff([]string{}, list()); diff != "" {
				t.Errorf("List(empty) (-want +got):\n%s", diff)
			}
			for _, n := range []string{"b", "c2", "a", "c10", "B"} {
				writeFile(t, fsys, path.Join(dir, n), nil)
			}
			if err := fsys.MkdirAll(path.Join(dir, "sub", "deeper"), 0o755); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"B", "a", "b", "c10", "c2", "sub"}, list()); diff != "" {
				t.Errorf("List after creates (-want +got):\n%s", diff)
			}
			if err := fsys.Rename(path.Join(dir, "a"), path.Join(dir, "z")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(path.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Rename(path.Join(dir, "c2"), path.Join(dir, "c10")); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"B", "c10", "sub", "z"}, list()); diff != "" {
				t.Errorf("List after rename and remove (-want +got):\n%s", diff)
			}
			if _, err := fsys.List(path.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("List(missing) = %v, want fs.ErrNotExist", err)
			}
		}},
		{"stat sizes", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			f, err := fsys.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			type info struct {
				Name  string
				Size  int64
				IsDir bool
			}
			stat := func() (info, info) {
				t.Helper()
				a, err := fsys.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				b, err := f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				return info{a.Name(), a.Size(), a.IsDir()}, info{b.Name(), b.Size(), b.IsDir()}
			}
			for _, step := range []struct {
				do   func() error
				size int64
			}{
				{func() error { return nil }, 0},
				{func() error { _, err := f.WriteAt(make([]byte, 10), 0); return err }, 10},
				{func() error { _, err := f.WriteAt([]byte("x"), 4095); return err }, 4096},
				{func() error { return f.Truncate(7) }, 7},
			} {
				if err := step.do(); err != nil {
					t.Fatal(err)
				}
				want := info{Name: "f", Size: step.size}
				byName, byFile := stat()
				if diff := cmp.Diff(want, byName); diff != "" {
					t.Errorf("FS.Stat (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want, byFile); diff != "" {
					t.Errorf("File.Stat (-want +got):\n%s", diff)
				}
			}
			fi, err := fsys.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.IsDir() {
				t.Errorf("Stat(%s).IsDir() = false", dir)
			}
		}},
		{"missing file errors name the path", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "missing")
			for _, op := range []struct {
				name string
				do   func() error
			}{
				{"Open", func() error { _, err := fsys.Open(p); return err }},
				{"OpenReadWrite", func() error { _, err := fsys.OpenReadWrite(p); return err }},
				{"OpenDir", func() error { _, err := fsys.OpenDir(p); return err }},
				{"Stat", func() error { _, err := fsys.Stat(p); return err }},
				{"Remove", func() error { return fsys.Remove(p) }},
			} {
				err := op.do()
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s(missing) = %v, want an error matching fs.ErrNotExist", op.name, err)
					continue
				}
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%s(missing) error %q does not name %s", op.name, err, p)
				}
			}
		}},
		{"open a directory is not a regular file", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "sub")
			if err := fsys.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, open := range []struct {
				name string
				open func(string) (vfs.File, error)
			}{{"Open", fsys.Open}, {"OpenReadWrite", fsys.OpenReadWrite}} {
				f, err := open.open(p)
				if err == nil {
					f.Close()
				}
				checkNotRegular(t, open.name, p, "directory", err)
			}
		}},
		{"open read-only rejects writes", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("abc"))
			f, err := fsys.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			if _, err := f.WriteAt([]byte("X"), 0); err == nil {
				t.Error("WriteAt on a read-only file succeeded")
			}
			if _, err := f.WriteAt([]byte("X"), 10); err == nil {
				t.Error("WriteAt past the end of a read-only file succeeded")
			}
			if err := f.Truncate(1); err == nil {
				t.Error("Truncate on a read-only file succeeded")
			}
			if err := f.Preallocate(0, 4096); err == nil {
				t.Error("Preallocate on a read-only file succeeded")
			}
			if got := readFile(t, fsys, p); got != "abc" {
				t.Errorf("contents = %q, want %q", got, "abc")
			}
			buf := make([]byte, 3)
			if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abc" {
				t.Errorf("ReadAt = %q, %v; want %q", buf, err, "abc")
			}
		}},
		{"open read-write writes through", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("abc"))
			f, err := fsys.OpenReadWrite(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("XYZW"), 1); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			mustClose(t, f)
			if got := readFile(t, fsys, p); got != "aXYZW" {
				t.Errorf("contents = %q, want %q", got, "aXYZW")
			}
		}},
		{"closed file fails", func(t *testing.T, fsys vfs.FS, dir string) {
			f, err := fsys.Create(path.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			mustClose(t, f)
			if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
				t.Errorf("ReadAt after Close = %v, want os.ErrClosed", err)
			}
			if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, os.ErrClosed) {
				t.Errorf("WriteAt after Close = %v, want os.ErrClosed", err)
			}
			if err := f.Sync(); err == nil {
				t.Error("Sync after Close succeeded")
			}
			if err := f.Close(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("second Close = %v, want os.ErrClosed", err)
			}
		}},
		{"name is the name opened", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			f, err := fsys.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			mustClose(t, f)
			for _, open := range []func(string) (vfs.File, error){fsys.Open, fsys.OpenReadWrite, func(n string) (vfs.File, error) { return fsys.Lock(n, true) }} {
				g, err := open(p)
				if err != nil {
					t.Fatal(err)
				}
				if g.Name() != p {
					t.Errorf("Name() = %q, want %q", g.Name(), p)
				}
				mustClose(t, g)
			}
			if f.Name() != p {
				t.Errorf("Name() of created file = %q, want %q", f.Name(), p)
			}
		}},
		{"sync files and directories", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("x")) // syncs a file opened by Create
			r, err := fsys.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Sync(); err != nil {
				t.Errorf("Sync of a read-only file: %v", err)
			}
			mustClose(t, r)
			d, err := fsys.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				t.Errorf("directory Sync: %v", err)
			}
			if err := d.Close(); err != nil {
				t.Errorf("directory Close: %v", err)
			}
			if err := vfs.SyncDir(fsys, dir); err != nil {
				t.Errorf("SyncDir: %v", err)
			}
			if _, err := fsys.OpenDir(p); err == nil {
				t.Error("OpenDir on a regular file succeeded")
			}
			if err := vfs.SyncDir(fsys, path.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("SyncDir(missing) = %v, want fs.ErrNotExist", err)
			}
		}},
		{"mkdirall", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "a", "b", "c")
			for range 2 { // the second call finds everything in place
				if err := fsys.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			fi, err := fsys.Stat(p)
			if err != nil || !fi.IsDir() {
				t.Fatalf("Stat(%s) = %v, %v; want a directory", p, fi, err)
			}
			writeFile(t, fsys, path.Join(dir, "file"), nil)
			if err := fsys.MkdirAll(path.Join(dir, "file", "sub"), 0o755); err == nil {
				t.Error("MkdirAll through a regular file succeeded")
			}
		}},
		{"lock exclusive twice conflicts", func(t *testing.T, fsys vfs.FS, dir string) {
			// On the OS the two locks are flocks on two open file
			// descriptions of one process: they conflict, as a second
			// process's would.
			p := path.Join(dir, "LOCK")
			l, err := fsys.Lock(p, true)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, l)
			_, err = fsys.Lock(p, true)
			if !errors.Is(err, vfs.ErrLocked) {
				t.Fatalf("second exclusive Lock = %v, want vfs.ErrLocked", err)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name %s", err, p)
			}
			if _, err := fsys.Lock(p, false); !errors.Is(err, vfs.ErrLocked) {
				t.Errorf("shared Lock under an exclusive one = %v, want vfs.ErrLocked", err)
			}
		}},
		{"lock shared twice then exclusive", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "LOCK")
			a, err := fsys.Lock(p, false)
			if err != nil {
				t.Fatal(err)
			}
			b, err := fsys.Lock(p, false)
			if err != nil {
				t.Fatalf("second shared Lock: %v", err)
			}
			if _, err := fsys.Lock(p, true); !errors.Is(err, vfs.ErrLocked) {
				t.Errorf("exclusive Lock under two shared = %v, want vfs.ErrLocked", err)
			}
			mustClose(t, a)
			if _, err := fsys.Lock(p, true); !errors.Is(err, vfs.ErrLocked) {
				t.Errorf("exclusive Lock under one shared = %v, want vfs.ErrLocked", err)
			}
			mustClose(t, b)
			c, err := fsys.Lock(p, true)
			if err != nil {
				t.Fatalf("exclusive Lock after both shared closed: %v", err)
			}
			mustClose(t, c)
		}},
		{"lock close releases", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "LOCK")
			for i := range 3 {
				l, err := fsys.Lock(p, true)
				if err != nil {
					t.Fatalf("exclusive Lock #%d: %v", i, err)
				}
				mustClose(t, l)
			}
		}},
		{"lock creates the file and keeps its contents", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "LOCK")
			l, err := fsys.Lock(p, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.WriteAt([]byte("pid 42\n"), 0); err != nil {
				t.Fatalf("write to lock file: %v", err)
			}
			mustClose(t, l)
			l, err = fsys.Lock(p, true)
			if err != nil {
				t.Fatal(err)
			}
			mustClose(t, l)
			if got := readFile(t, fsys, p); got != "pid 42\n" {
				t.Errorf("lock file = %q after a second Lock, want %q", got, "pid 42\n")
			}
		}},
		{"lock in missing directory fails", func(t *testing.T, fsys vfs.FS, dir string) {
			if _, err := fsys.Lock(path.Join(dir, "nope", "LOCK"), true); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Lock in missing directory = %v, want fs.ErrNotExist", err)
			}
		}},
		{"preallocate", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			f, err := fsys.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			if _, err := f.WriteAt([]byte("ab"), 0); err != nil {
				t.Fatal(err)
			}
			size := func() int64 {
				t.Helper()
				fi, err := f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				return fi.Size()
			}
			if err := f.Preallocate(0, 4096); err != nil {
				t.Fatalf("Preallocate: %v", err)
			}
			got := size()
			if got == 2 && fsys == vfs.OS {
				// Allowed by the contract where fallocate is unsupported
				// (ext4, xfs and tmpfs support it).
				t.Logf("Preallocate is a no-op on this file system")
				return
			}
			if got != 4096 {
				t.Fatalf("size after Preallocate(0, 4096) = %d, want 4096", got)
			}
			want := "ab" + strings.Repeat("\x00", 4094)
			if diff := cmp.Diff(want, readFile(t, fsys, p)); diff != "" {
				t.Errorf("contents after Preallocate (-want +got):\n%s", diff)
			}
			// A range inside the file changes nothing; n <= 0 is a no-op.
			for _, r := range [][2]int64{{0, 10}, {100, 1000}, {8192, 0}, {8192, -1}} {
				if err := f.Preallocate(r[0], r[1]); err != nil {
					t.Errorf("Preallocate(%d, %d): %v", r[0], r[1], err)
				}
				if got := size(); got != 4096 {
					t.Errorf("size after Preallocate(%d, %d) = %d, want 4096", r[0], r[1], got)
				}
			}
			// Writes inside the reserved range do not move the end.
			if _, err := f.WriteAt([]byte("cd"), 100); err != nil {
				t.Fatal(err)
			}
			if got := size(); got != 4096 {
				t.Errorf("size after a write inside the reserved range = %d, want 4096", got)
			}
			if err := f.Preallocate(4000, 200); err != nil {
				t.Fatal(err)
			}
			if got := size(); got != 4200 {
				t.Errorf("size after Preallocate(4000, 200) = %d, want 4200", got)
			}
		}},
		{"preallocate negative offset fails", func(t *testing.T, fsys vfs.FS, dir string) {
			f, err := fsys.Create(path.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			if err := f.Preallocate(-10, 100); err == nil {
				t.Error("Preallocate(-10, 100) succeeded")
			}
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != 0 {
				t.Errorf("size after failed Preallocate = %d, want 0", fi.Size())
			}
		}},
		{"read prefix", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			writeFile(t, fsys, p, []byte("kv data directory\n"))
			for _, tc := range []struct {
				n    int
				want string
			}{{0, ""}, {2, "kv"}, {18, "kv data directory\n"}, {257, "kv data directory\n"}} {
				b, err := vfs.ReadPrefix(fsys, p, tc.n)
				if err != nil || string(b) != tc.want {
					t.Errorf("ReadPrefix(%d) = %q, %v; want %q", tc.n, b, err, tc.want)
				}
			}
			writeFile(t, fsys, path.Join(dir, "empty"), nil)
			if b, err := vfs.ReadPrefix(fsys, path.Join(dir, "empty"), 8); err != nil || len(b) != 0 {
				t.Errorf("ReadPrefix of an empty file = %q, %v", b, err)
			}
			missing := path.Join(dir, "missing")
			_, err := vfs.ReadPrefix(fsys, missing, 8)
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("ReadPrefix of a missing file: %v, want fs.ErrNotExist naming it", err)
			}
		}},
		{"map file", func(t *testing.T, fsys vfs.FS, dir string) {
			for _, content := range [][]byte{nil, []byte("kv"), bytes.Repeat([]byte("0123456789abcdef"), 1000)} {
				p := path.Join(dir, "f"+strconv.Itoa(len(content)))
				writeFile(t, fsys, p, content)
				m, err := vfs.MapFile(fsys, p)
				if err != nil {
					t.Fatalf("MapFile of %d bytes: %v", len(content), err)
				}
				if !bytes.Equal(m.Bytes(), content) {
					t.Errorf("MapFile of %d bytes gave %d bytes, not the file's", len(content), len(m.Bytes()))
				}
				if err := m.Close(); err != nil {
					t.Error(err)
				}
			}
			missing := path.Join(dir, "missing")
			_, err := vfs.MapFile(fsys, missing)
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("MapFile of a missing file: %v, want fs.ErrNotExist naming it", err)
			}
		}},
		{"size", func(t *testing.T, fsys vfs.FS, dir string) {
			f, err := fsys.Create(path.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, f)
			for _, end := range []int64{0, 5, 4096, 10000} {
				if end > 0 {
					if _, err := f.WriteAt([]byte("x"), end-1); err != nil {
						t.Fatal(err)
					}
				}
				got, err := vfs.Size(f)
				fi, serr := f.Stat()
				if err != nil || serr != nil || got != end || fi.Size() != end {
					t.Errorf("Size = %d, %v and Stat's %v, %v; want %d", got, err, fi, serr, end)
				}
			}
		}},
		{"large write", func(t *testing.T, fsys vfs.FS, dir string) {
			p := path.Join(dir, "f")
			data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
			writeFile(t, fsys, p, data)
			if got := readFile(t, fsys, p); got != string(data) {
				t.Errorf("1 MiB file read back differs (len %d, want %d)", len(got), len(data))
			}
		}},
	}
	for _, fsc := range fileSystems() {
		t.Run(fsc.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					fsys, dir := fsc.new(t)
					tc.run(t, fsys, dir)
				})
			}
		})
	}
}

// TestWillNeed checks that the read-ahead hint leaves a file's contents as
// they were, on the OS and in memory.
func TestWillNeed(t *testing.T) {
	for name, fsys := range map[string]vfs.FS{"os": vfs.OS, "mem": vfs.NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if name == "mem" {
				dir = "d"
				if err := fsys.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f, err := fsys.Create(dir + "/f")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
				t.Fatal(err)
			}
			vfs.WillNeed(f)
			b := make([]byte, 5)
			if _, err := f.ReadAt(b, 0); err != nil || string(b) != "hello" {
				t.Fatalf("after WillNeed: %q, %v", b, err)
			}
		})
	}
}

// checkNotRegular checks that err, from opening name with op, is an
// *os.PathError naming name, matching vfs.ErrNotRegular and saying that
// the name is a kind.
func checkNotRegular(t *testing.T, op, name, kind string, err error) {
	t.Helper()
	var pe *os.PathError
	switch {
	case err == nil:
		t.Errorf("%s(%s) of a %s succeeded", op, name, kind)
	case !errors.Is(err, vfs.ErrNotRegular):
		t.Errorf("%s(%s) of a %s: %v, want an error matching vfs.ErrNotRegular", op, name, kind, err)
	case !errors.As(err, &pe) || pe.Path != name:
		t.Errorf("%s(%s) of a %s: %v, want an *os.PathError naming %s", op, name, kind, err, name)
	case !strings.Contains(err.Error(), kind):
		t.Errorf("%s(%s): %v does not say it is a %s", op, name, err, kind)
	}
}

// TestOSRefusesNonRegular plants what the store never creates under a
// file's name: Open and OpenReadWrite must refuse each with ErrNotRegular
// saying what it is, at once (a FIFO without a writer must not block the
// open), and never change what a symbolic link points to.
func TestOSRefusesNonRegular(t *testing.T) {
	tests := []struct {
		name string
		kind string
		// plant makes name something other than a regular file.
		plant func(t *testing.T, name string)
	}{
		{name: "symlink to a file", kind: "symbolic link", plant: func(t *testing.T, name string) {
			target := filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(target, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, name); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dangling symlink", kind: "symbolic link", plant: func(t *testing.T, name string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "nothing"), name); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink to a directory", kind: "symbolic link", plant: func(t *testing.T, name string) {
			if err := os.Symlink(t.TempDir(), name); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "directory", kind: "directory", plant: func(t *testing.T, name string) {
			if err := os.Mkdir(name, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "FIFO", kind: "FIFO", plant: func(t *testing.T, name string) {
			if err := unix.Mkfifo(name, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "socket", kind: "socket", plant: func(t *testing.T, name string) {
			l, err := net.Listen("unix", name)
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { l.Close() })
		}},
		{name: "character device", kind: "character device", plant: func(t *testing.T, name string) {
			// Devices cannot be made without privileges: open one where
			// it is.
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "log.000001")
			if tc.kind == "character device" {
				name = os.DevNull
			}
			tc.plant(t, name)
			var target []byte
			if dst, err := os.Readlink(name); err == nil {
				target, _ = os.ReadFile(dst)
			}
			for _, open := range []struct {
				name string
				open func(string) (vfs.File, error)
			}{{"Open", vfs.OS.Open}, {"OpenReadWrite", vfs.OS.OpenReadWrite}, {"ReadPrefix", func(name string) (vfs.File, error) {
				_, err := vfs.ReadPrefix(vfs.OS, name, 16)
				return nil, err
			}}, {"MapFile", func(name string) (vfs.File, error) {
				m, err := vfs.MapFile(vfs.OS, name)
				if err == nil {
					m.Close()
				}
				return nil, err
			}}} {
				type result struct {
					f   vfs.File
					err error
				}
				done := make(chan result, 1)
				go func() {
					f, err := open.open(name)
					done <- result{f, err}
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(5 * time.Second):
					// Let a blocked open of a FIFO return.
					if w, err := os.OpenFile(name, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
					t.Fatalf("%s(%s) of a %s blocked", open.name, name, tc.kind)
				}
				if r.f != nil {
					r.f.Close()
				}
				checkNotRegular(t, open.name, name, tc.kind, r.err)
			}
			if dst, err := os.Readlink(name); err == nil {
				if got, _ := os.ReadFile(dst); !bytes.Equal(got, target) {
					t.Errorf("the symlink's target changed: %q, was %q", got, target)
				}
			}
		})
	}
}
