package recovery_test

import (
	"errors"
	"os"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// errCrashed is what every file operation returns once a crashFS has run
// out of operations: the process is dead, nothing more reaches the files.
var errCrashed = errors.New("simulated crash")

// crashFS lets the first budget operations that change files through, and
// fails every operation after them, so that the underlying MemFS holds the
// state a process crash after that many operations leaves.
type crashFS struct {
	vfs.FS
	budget int
	ops    int // operations let through
}

func (c *crashFS) step() error {
	if c.ops >= c.budget {
		return errCrashed
	}
	c.ops++
	return nil
}

func (c *crashFS) dead() bool { return c.ops >= c.budget }

func (c *crashFS) Create(name string) (vfs.File, error) {
	if err := c.step(); err != nil {
		return nil, err
	}
	f, err := c.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

func (c *crashFS) Open(name string) (vfs.File, error) {
	if c.dead() {
		return nil, errCrashed
	}
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

func (c *crashFS) OpenReadWrite(name string) (vfs.File, error) {
	if c.dead() {
		return nil, errCrashed
	}
	f, err := c.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

func (c *crashFS) OpenDir(name string) (vfs.File, error) {
	if c.dead() {
		return nil, errCrashed
	}
	f, err := c.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

func (c *crashFS) Rename(o, n string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.FS.Rename(o, n)
}

func (c *crashFS) Remove(name string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.FS.Remove(name)
}

func (c *crashFS) List(dir string) ([]string, error) {
	if c.dead() {
		return nil, errCrashed
	}
	return c.FS.List(dir)
}

func (c *crashFS) Stat(name string) (os.FileInfo, error) {
	if c.dead() {
		return nil, errCrashed
	}
	return c.FS.Stat(name)
}

type crashFile struct {
	vfs.File
	c *crashFS
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.c.step(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *crashFile) Sync() error {
	if err := f.c.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *crashFile) Truncate(size int64) error {
	if err := f.c.step(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *crashFile) Preallocate(off, n int64) error {
	if err := f.c.step(); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	if f.c.dead() {
		return 0, errCrashed
	}
	return f.File.ReadAt(p, off)
}

// files returns every file in dir with its bytes.
func files(tb testing.TB, fsys vfs.FS, dir string) map[string]string {
	tb.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := vfs.ReadFile(fsys, dir+"/"+n)
		if err != nil {
			tb.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

func newDir(tb testing.TB) (*vfs.MemFS, string) {
	tb.Helper()
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		tb.Fatal(err)
	}
	return fsys, "/data"
}

func readAll(fsys vfs.FS, name string) ([]byte, error) { return vfs.ReadFile(fsys, name) }
