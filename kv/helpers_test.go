package kv_test

import (
	"os"
	"sync"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// hookFS wraps a vfs.FS and calls onSync before every file sync, and
// onWrite before every positional write, so that tests can block or fail
// them.
type hookFS struct {
	vfs.FS
	mu      sync.Mutex
	onSync  func(name string) error
	onWrite func(name string) error
}

func (h *hookFS) hook(name string) error {
	h.mu.Lock()
	f := h.onSync
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(name)
}

func (h *hookFS) setSync(f func(name string) error) {
	h.mu.Lock()
	h.onSync = f
	h.mu.Unlock()
}

func (h *hookFS) setWrite(f func(name string) error) {
	h.mu.Lock()
	h.onWrite = f
	h.mu.Unlock()
}

func (h *hookFS) writeHook(name string) error {
	h.mu.Lock()
	f := h.onWrite
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(name)
}

func (h *hookFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, h: h}, nil
}

func (h *hookFS) Create(name string) (vfs.File, error)     { return h.wrap(h.FS.Create(name)) }
func (h *hookFS) Open(name string) (vfs.File, error)       { return h.wrap(h.FS.Open(name)) }
func (h *hookFS) OpenDir(name string) (vfs.File, error)    { return h.wrap(h.FS.OpenDir(name)) }
func (h *hookFS) OpenReadWrite(n string) (vfs.File, error) { return h.wrap(h.FS.OpenReadWrite(n)) }

type hookFile struct {
	vfs.File
	h *hookFS
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.h.writeHook(f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *hookFile) Sync() error {
	if err := f.h.hook(f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

// memStore opens a store on a fresh in-memory file system.
func memStore(tb testing.TB, opts *kv.Options) (*kv.Store, *vfs.MemFS) {
	tb.Helper()
	fsys := vfs.NewMem()
	o := kv.Options{}
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = fsys
	}
	s, err := kv.Open("/data", &o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, fsys
}

// reopen recovers the directory from fsys (a crash clone, typically).
func reopen(tb testing.TB, fsys vfs.FS, opts kv.Options) *kv.Store {
	tb.Helper()
	opts.FS = fsys
	s, err := kv.Open("/data", &opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func dumpStore(s *kv.Store) map[string]string {
	out := map[string]string{}
	for e := range s.Scan(nil, nil) {
		out[string(e.Key)] = string(e.Value)
	}
	return out
}

var _ = os.Getpid
