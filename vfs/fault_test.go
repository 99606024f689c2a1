package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// TestInjectErrno checks that a rule returning an errno fails the
// operation as the OS file system does: an *os.PathError naming the
// operation and the file, matching the errno with errors.Is.
func TestInjectErrno(t *testing.T) {
	in := &vfs.Inject{FS: newMem(t), Rule: func(op vfs.Op) error {
		switch op.Kind {
		case vfs.OpWrite:
			return syscall.ENOSPC
		case vfs.OpPreallocate:
			if op.Off != 100 || op.Len != 4096 {
				t.Errorf("preallocate op %+v, want offset 100 and length 4096", op)
			}
			return syscall.ENOSPC
		case vfs.OpSync:
			return syscall.EIO
		}
		return nil
	}}
	f, err := in.Create("d/f")
	must(t, err)
	checks := []struct {
		name  string
		err   error
		errno syscall.Errno
	}{
		{"write", func() error { _, err := f.WriteAt([]byte("abc"), 0); return err }(), syscall.ENOSPC},
		{"preallocate", f.Preallocate(100, 4096), syscall.ENOSPC},
		{"sync", f.Sync(), syscall.EIO},
	}
	for _, c := range checks {
		var pe *os.PathError
		if !errors.Is(c.err, c.errno) || !errors.As(c.err, &pe) || pe.Path != "d/f" || pe.Op != c.name {
			t.Errorf("%s: %v, want an *os.PathError for %s d/f matching %v", c.name, c.err, c.name, c.errno)
		}
	}
}

// TestShortWrite checks that a ShortWrite writes the first bytes, cut back
// to an Align boundary of the file, and then fails with its cause.
func TestShortWrite(t *testing.T) {
	tests := []struct {
		name    string
		sw      vfs.ShortWrite
		off     int64
		n       int
		wantN   int
		wantErr error
	}{
		{"first bytes", vfs.ShortWrite{N: 3}, 0, 10, 3, syscall.EIO},
		{"N past the buffer", vfs.ShortWrite{N: 50, Err: syscall.ENOSPC}, 0, 10, 10, syscall.ENOSPC},
		{"nothing", vfs.ShortWrite{N: 0, Err: syscall.ENOSPC}, 0, 10, 0, syscall.ENOSPC},
		{"to a sector boundary", vfs.ShortWrite{N: 1 << 20, Align: 512, Err: syscall.ENOSPC}, 500, 100, 12, syscall.ENOSPC},
		{"no boundary crossed", vfs.ShortWrite{N: 1 << 20, Align: 512, Err: syscall.ENOSPC}, 0, 100, 0, syscall.ENOSPC},
		{"N before the boundary", vfs.ShortWrite{N: 5, Align: 512}, 500, 100, 0, syscall.EIO},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			sw := tc.sw
			in := &vfs.Inject{FS: m, Rule: func(op vfs.Op) error {
				if op.Kind == vfs.OpWrite {
					if op.Off != tc.off || op.Len != int64(tc.n) {
						t.Errorf("write op %+v, want offset %d and length %d", op, tc.off, tc.n)
					}
					return &sw
				}
				return nil
			}}
			f, err := in.Create("d/f")
			must(t, err)
			buf := make([]byte, tc.n)
			for i := range buf {
				buf[i] = byte('a' + i%26)
			}
			n, err := f.WriteAt(buf, tc.off)
			if n != tc.wantN || !errors.Is(err, tc.wantErr) {
				t.Fatalf("WriteAt = %d, %v; want %d and %v", n, err, tc.wantN, tc.wantErr)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != "d/f" || pe.Op != "write" {
				t.Errorf("error %v does not name the write and the file", err)
			}
			got := []byte(readFile(t, m, "d/f"))
			want := []byte{}
			if tc.wantN > 0 {
				want = append(make([]byte, tc.off), buf[:tc.wantN]...)
			}
			if string(got) != string(want) {
				t.Errorf("file holds %q, want %q", got, want)
			}
		})
	}
}

// TestOSFilePermissions checks the modes of the files the OS FS creates:
// 0600 by default, as asked through NewOS otherwise, and that Lock does
// not follow a symbolic link planted under the lock's name.
func TestOSFilePermissions(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, tc := range []struct {
		fsys vfs.FS
		name string
		want fs.FileMode
	}{
		{vfs.OS, "default", 0o600},
		{vfs.NewOS(0), "zero", 0o600},
		{vfs.NewOS(0o640), "0640", 0o640},
	} {
		f, err := tc.fsys.Create(filepath.Join(dir, tc.name))
		must(t, err)
		must(t, f.Close())
		l, err := tc.fsys.Lock(filepath.Join(dir, tc.name+".lock"), true)
		must(t, err)
		must(t, l.Close())
		for _, n := range []string{tc.name, tc.name + ".lock"} {
			fi, err := os.Stat(filepath.Join(dir, n))
			must(t, err)
			if got := fi.Mode().Perm(); got != tc.want {
				t.Errorf("%s: mode %v, want %v", n, got, tc.want)
			}
		}
	}

	outside := filepath.Join(t.TempDir(), "precious")
	must(t, os.WriteFile(outside, []byte("keep me"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(dir, "LOCK")))
	if l, err := vfs.OS.Lock(filepath.Join(dir, "LOCK"), true); err == nil {
		l.Close()
		t.Error("Lock followed a symbolic link")
	}
	if _, err := vfs.OS.Create(filepath.Join(dir, "LOCK")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over a symbolic link: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Errorf("the link's target now holds %q", b)
	}
}
