package vfs_test

import (
	"bytes"
	"errors"
	"path"
	"runtime/debug"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// TestMap checks that every file system gives a view holding the file's
// bytes: a mapping on the OS, a copy read through the File elsewhere.
func TestMap(t *testing.T) {
	for _, fsys := range fileSystems() {
		t.Run(fsys.name, func(t *testing.T) {
			fs, dir := fsys.new(t)
			name := path.Join(dir, "f")
			want := bytes.Repeat([]byte("0123456789abcdef"), 1000)
			f, err := fs.Create(name)
			must(t, err)
			_, err = f.WriteAt(want, 0)
			must(t, err)
			must(t, f.Close())
			f, err = fs.Open(name)
			must(t, err)
			m, err := vfs.Map(f, int64(len(want)))
			must(t, err)
			must(t, f.Close()) // the view outlives the file
			if !bytes.Equal(m.Bytes(), want) {
				t.Errorf("the view differs from the file")
			}
			if m.Mapped() != (fsys.name == "OS") {
				t.Errorf("Mapped() = %v on %s", m.Mapped(), fsys.name)
			}
			m.Advise(0, int64(len(want)), vfs.AdviceRandom)
			must(t, m.Close())
			if m.Bytes() != nil {
				t.Errorf("Bytes after Close is not nil")
			}

			// A size past the end of the file is refused on a copy; a
			// mapping takes it (the pages past the end fault), which
			// TestMapFault covers.
			if fsys.name != "OS" {
				f, err = fs.Open(name)
				must(t, err)
				defer f.Close()
				if _, err := vfs.Map(f, int64(len(want))+1); err == nil {
					t.Errorf("a copy of more bytes than the file holds: no error")
				}
			}
		})
	}
}

// readGuarded reads b[off] the way a reader of a mapping must.
func readGuarded(m *vfs.Mapping, off int) (v byte, err error) {
	defer m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return m.Bytes()[off], nil
}

// TestMapFault raises a real SIGBUS: a mapped file cut short under its
// mapping, then read past its new end. The read must return a
// *FaultError naming the file and offset, not crash the process; a read
// before the cut still works. Without the recover in CatchFault, or
// without SetPanicOnFault, the test binary dies.
func TestMapFault(t *testing.T) {
	dir := t.TempDir()
	name := path.Join(dir, "f")
	f, err := vfs.OS.Create(name)
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{7}, 3*4096), 0)
	must(t, err)
	m, err := vfs.Map(f, 3*4096)
	must(t, err)
	defer m.Close()
	must(t, f.Truncate(4096))
	must(t, f.Close())
	if v, err := readGuarded(m, 100); err != nil || v != 7 {
		t.Errorf("read inside the file: %d, %v", v, err)
	}
	_, err = readGuarded(m, 2*4096+5)
	var fe *vfs.FaultError
	if !errors.Is(err, vfs.ErrMapFault) || !errors.As(err, &fe) || fe.File != name || fe.Offset != 2*4096+5 {
		t.Fatalf("read past the cut: %v, want a *FaultError at %s offset %d", err, name, 2*4096+5)
	}
}

// TestCatchFaultPassesOtherPanics checks that CatchFault recovers only
// faults inside its own mapping.
func TestCatchFaultPassesOtherPanics(t *testing.T) {
	dir := t.TempDir()
	f, err := vfs.OS.Create(path.Join(dir, "f"))
	must(t, err)
	_, err = f.WriteAt(make([]byte, 4096), 0)
	must(t, err)
	m, err := vfs.Map(f, 4096)
	must(t, err)
	defer m.Close()
	f.Close()
	defer func() {
		if r := recover(); r != "other" {
			t.Errorf("recovered %v, want the panic passed on", r)
		}
	}()
	var err2 error
	func() {
		defer m.CatchFault(&err2)
		panic("other")
	}()
	t.Errorf("the panic was swallowed: %v", err2)
}
