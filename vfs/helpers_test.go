package vfs_test

import (
	"path"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// fileSystem is one FS under test, with a way to get an empty directory
// in it.
type fileSystem struct {
	name string
	// new returns the FS and an empty, existing directory in it.
	new func(t testing.TB) (vfs.FS, string)
}

// fileSystems are the implementations every conformance test runs on.
func fileSystems() []fileSystem {
	return []fileSystem{
		{name: "OS", new: func(t testing.TB) (vfs.FS, string) {
			return vfs.OS, t.TempDir()
		}},
		{name: "Mem", new: func(t testing.TB) (vfs.FS, string) {
			t.Helper()
			m := vfs.NewMem()
			if err := m.MkdirAll("data", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "data"
		}},
		{name: "Inject", new: func(t testing.TB) (vfs.FS, string) {
			// A wrapper with no rule must behave as what it wraps.
			t.Helper()
			m := vfs.NewMem()
			if err := m.MkdirAll("data", 0o755); err != nil {
				t.Fatal(err)
			}
			return &vfs.Inject{FS: m}, "data"
		}},
	}
}

// writeFile creates name with data, syncs it and closes it. It does not
// sync the directory.
func writeFile(t testing.TB, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 {
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readFile returns the contents of name; it fails the test when name
// cannot be read.
func readFile(t testing.TB, fsys vfs.FS, name string) string {
	t.Helper()
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syncDir makes dir's entries durable.
func syncDir(t testing.TB, fsys vfs.FS, dir string) {
	t.Helper()
	if err := vfs.SyncDir(fsys, dir); err != nil {
		t.Fatal(err)
	}
}

// dump returns every file and directory of fsys under dir: files map to
// their contents, directories (with a trailing slash) to "".
func dump(t testing.TB, fsys vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := path.Join(dir, n)
			fi, err := fsys.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			out[p] = readFile(t, fsys, p)
		}
	}
	walk(dir)
	return out
}

func mustClose(t testing.TB, f vfs.File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
