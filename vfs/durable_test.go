package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// TestReadDurableOS: on the host's file system, bytes written and
// fdatasynced read back the same past the page cache, at any offset and
// length, aligned or not, and a read past the end is short with io.EOF.
// A file system that refuses O_DIRECT (tmpfs) gives ErrNotSupported.
func TestReadDurableOS(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := vfs.OS.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, f)
	for _, c := range []struct{ off, n int }{{0, 10000}, {1, 100}, {4095, 2}, {4096, 4096}, {9000, 1000}, {5000, 3333}} {
		p := make([]byte, c.n)
		n, err := vfs.ReadDurableAt(vfs.OS, name, p, int64(c.off))
		if vfs.IsNotSupported(err) {
			t.Skipf("the file system of %s refuses O_DIRECT: %v", name, err)
		}
		if err != nil || n != c.n || !bytes.Equal(p, data[c.off:c.off+c.n]) {
			t.Fatalf("ReadDurableAt(%d, %d) = %d, %v; bytes equal: %v", c.off, c.n, n, err, bytes.Equal(p[:n], data[c.off:c.off+n]))
		}
	}
	p := make([]byte, 100)
	if n, err := vfs.ReadDurableAt(vfs.OS, name, p, 9950); n != 50 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:50], data[9950:]) {
		t.Fatalf("a read across the end: %d, %v; want 50, io.EOF", n, err)
	}
	if n, err := vfs.ReadDurableAt(vfs.OS, name, p, 20000); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("a read past the end: %d, %v; want 0, io.EOF", n, err)
	}
}

// TestReadDurableMem: the in-memory file system reads a file's durable
// contents: not what was written since the last sync, nor what a failed
// fdatasync (DropDirty) left in the cache alone, even after a later sync.
func TestReadDurableMem(t *testing.T) {
	m := vfs.NewMem()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("synced."), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("lost"), 7); err != nil {
		t.Fatal(err)
	}
	if err := m.DropDirty("/f"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // succeeds, and writes nothing
		t.Fatal(err)
	}
	got := make([]byte, 11)
	if n, err := f.ReadAt(got, 0); n != 11 || string(got) != "synced.lost" {
		t.Fatalf("the cache reads %q, %v", got[:n], err)
	}
	n, err := vfs.ReadDurableAt(m, "/f", got, 0)
	if n != 7 || !errors.Is(err, io.EOF) || string(got[:n]) != "synced." {
		t.Fatalf("ReadDurableAt = %q, %v; want %q and io.EOF", got[:n], err, "synced.")
	}
	// A wrapper passes it on; a file system without it says so.
	if n, err := vfs.ReadDurableAt(vfs.NewRecorder(m, nil), "/f", got, 0); n != 7 {
		t.Fatalf("through a Recorder: %d, %v", n, err)
	}
	type plain struct{ vfs.FS }
	if _, err := vfs.ReadDurableAt(plain{m}, "/f", got, 0); !errors.Is(err, vfs.ErrNotSupported) {
		t.Fatalf("a file system without it: %v, want ErrNotSupported", err)
	}
}
