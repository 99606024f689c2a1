package vfs_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/vfs"
)

// newMem returns a MemFS with the durable directory "d".
func newMem(t testing.TB) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// must fails the test on a non-nil error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// createUnsynced creates name with data and neither syncs it nor its
// directory.
func createUnsynced(t testing.TB, m vfs.FS, name, data string) {
	t.Helper()
	f, err := m.Create(name)
	must(t, err)
	if data != "" {
		_, err = f.WriteAt([]byte(data), 0)
		must(t, err)
	}
	mustClose(t, f)
}

// durable creates name with data and makes both durable.
func durable(t testing.TB, m vfs.FS, name, data string) {
	t.Helper()
	writeFile(t, m, name, []byte(data))
	syncDir(t, m, "d")
}

// update opens name read-write and applies fn to it.
func update(t testing.TB, m vfs.FS, name string, fn func(f vfs.File) error) {
	t.Helper()
	f, err := m.OpenReadWrite(name)
	must(t, err)
	must(t, fn(f))
	mustClose(t, f)
}

func writeAt(s string, off int64) func(vfs.File) error {
	return func(f vfs.File) error { _, err := f.WriteAt([]byte(s), off); return err }
}

func syncFile(f vfs.File) error { return f.Sync() }

// TestMemCrash checks what CrashClone (a power loss) and Clone (a process
// crash) keep after a sequence of operations on a MemFS.
func TestMemCrash(t *testing.T) {
	tests := []struct {
		name        string
		ops         func(t testing.TB, m *vfs.MemFS)
		wantCrash   map[string]string // CrashClone: only what was synced
		wantCurrent map[string]string // Clone: everything
	}{
		{
			name: "nothing",
			ops:  func(t testing.TB, m *vfs.MemFS) {},
			wantCrash: map[string]string{
				"d/": "",
			},
			wantCurrent: map[string]string{
				"d/": "",
			},
		},
		{
			name: "unsynced data is lost",
			ops: func(t testing.TB, m *vfs.MemFS) {
				createUnsynced(t, m, "d/f", "abc")
				syncDir(t, m, "d")
			},
			wantCrash:   map[string]string{"d/": "", "d/f": ""},
			wantCurrent: map[string]string{"d/": "", "d/f": "abc"},
		},
		{
			name: "synced data is kept",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "abc")
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "abc"},
			wantCurrent: map[string]string{"d/": "", "d/f": "abc"},
		},
		{
			name: "data synced after the directory is kept",
			ops: func(t testing.TB, m *vfs.MemFS) {
				createUnsynced(t, m, "d/f", "")
				syncDir(t, m, "d")
				update(t, m, "d/f", writeAt("abc", 0))
				update(t, m, "d/f", syncFile)
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "abc"},
			wantCurrent: map[string]string{"d/": "", "d/f": "abc"},
		},
		{
			name: "writes after the last sync are lost",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "abc")
				update(t, m, "d/f", writeAt("XY", 1))
				update(t, m, "d/f", writeAt("def", 3))
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "abc"},
			wantCurrent: map[string]string{"d/": "", "d/f": "aXYdef"},
		},
		{
			name: "truncate after the last sync is lost",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "abc")
				update(t, m, "d/f", func(f vfs.File) error { return f.Truncate(1) })
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "abc"},
			wantCurrent: map[string]string{"d/": "", "d/f": "a"},
		},
		{
			name: "synced truncate is kept",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "abc")
				update(t, m, "d/f", func(f vfs.File) error {
					if err := f.Truncate(1); err != nil {
						return err
					}
					return f.Sync()
				})
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "a"},
			wantCurrent: map[string]string{"d/": "", "d/f": "a"},
		},
		{
			name: "created file vanishes without a directory sync",
			ops: func(t testing.TB, m *vfs.MemFS) {
				writeFile(t, m, "d/f", []byte("abc")) // data synced
			},
			wantCrash:   map[string]string{"d/": ""},
			wantCurrent: map[string]string{"d/": "", "d/f": "abc"},
		},
		{
			name: "syncing the parent directory does not make a subdirectory's entries durable",
			ops: func(t testing.TB, m *vfs.MemFS) {
				writeFile(t, m, "d/f", []byte("abc"))
				syncDir(t, m, ".")
			},
			wantCrash:   map[string]string{"d/": ""},
			wantCurrent: map[string]string{"d/": "", "d/f": "abc"},
		},
		{
			name: "rename without a directory sync is undone",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/a", "A")
				must(t, m.Rename("d/a", "d/b"))
			},
			wantCrash:   map[string]string{"d/": "", "d/a": "A"},
			wantCurrent: map[string]string{"d/": "", "d/b": "A"},
		},
		{
			name: "rename over a file without a directory sync is undone",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/a", "new")
				durable(t, m, "d/b", "old")
				must(t, m.Rename("d/a", "d/b"))
			},
			wantCrash:   map[string]string{"d/": "", "d/a": "new", "d/b": "old"},
			wantCurrent: map[string]string{"d/": "", "d/b": "new"},
		},
		{
			name: "rename with a directory sync is kept",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/a", "new")
				durable(t, m, "d/b", "old")
				must(t, m.Rename("d/a", "d/b"))
				syncDir(t, m, "d")
			},
			wantCrash:   map[string]string{"d/": "", "d/b": "new"},
			wantCurrent: map[string]string{"d/": "", "d/b": "new"},
		},
		{
			name: "remove without a directory sync comes back",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "abc")
				must(t, m.Remove("d/f"))
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "abc"},
			wantCurrent: map[string]string{"d/": ""},
		},
		{
			name: "remove with a directory sync is kept",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "abc")
				must(t, m.Remove("d/f"))
				syncDir(t, m, "d")
			},
			wantCrash:   map[string]string{"d/": ""},
			wantCurrent: map[string]string{"d/": ""},
		},
		{
			name: "removed and re-created name comes back with the old inode",
			ops: func(t testing.TB, m *vfs.MemFS) {
				durable(t, m, "d/f", "old")
				must(t, m.Remove("d/f"))
				writeFile(t, m, "d/f", []byte("new"))
			},
			wantCrash:   map[string]string{"d/": "", "d/f": "old"},
			wantCurrent: map[string]string{"d/": "", "d/f": "new"},
		},
		{
			name: "mkdirall is durable at once",
			ops: func(t testing.TB, m *vfs.MemFS) {
				must(t, m.MkdirAll("d/e/f", 0o755))
			},
			wantCrash:   map[string]string{"d/": "", "d/e/": "", "d/e/f/": ""},
			wantCurrent: map[string]string{"d/": "", "d/e/": "", "d/e/f/": ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			tc.ops(t, m)
			if diff := cmp.Diff(tc.wantCrash, dump(t, m.CrashClone(), ".")); diff != "" {
				t.Errorf("CrashClone (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCurrent, dump(t, m.Clone(), ".")); diff != "" {
				t.Errorf("Clone (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCurrent, dump(t, m, ".")); diff != "" {
				t.Errorf("live FS (-want +got):\n%s", diff)
			}
			// A clone carries the durable state too: crashing it gives
			// the same state as crashing the original.
			if diff := cmp.Diff(tc.wantCrash, dump(t, m.Clone().CrashClone(), ".")); diff != "" {
				t.Errorf("Clone().CrashClone() (-want +got):\n%s", diff)
			}
			// After a crash everything left is durable.
			if diff := cmp.Diff(tc.wantCrash, dump(t, m.CrashClone().CrashClone(), ".")); diff != "" {
				t.Errorf("CrashClone().CrashClone() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMemClonesAreIndependent checks that changes to a clone and to the
// original do not leak into each other.
func TestMemClonesAreIndependent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clone func(*vfs.MemFS) *vfs.MemFS
	}{
		{"Clone", (*vfs.MemFS).Clone},
		{"CrashClone", (*vfs.MemFS).CrashClone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			durable(t, m, "d/f", "abc")
			c := tc.clone(m)
			update(t, c, "d/f", writeAt("X", 0))
			update(t, c, "d/f", syncFile)
			createUnsynced(t, c, "d/g", "clone")
			update(t, m, "d/f", writeAt("Y", 1))
			update(t, m, "d/f", syncFile)
			createUnsynced(t, m, "d/h", "orig")
			want := map[string]string{"d/": "", "d/f": "aYc", "d/h": "orig"}
			if diff := cmp.Diff(want, dump(t, m, ".")); diff != "" {
				t.Errorf("original (-want +got):\n%s", diff)
			}
			want = map[string]string{"d/": "", "d/f": "Xbc", "d/g": "clone"}
			if diff := cmp.Diff(want, dump(t, c, ".")); diff != "" {
				t.Errorf("clone (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMemSharingAfterRename checks that a durable name and a current name
// of the same file stay one file (like a hard link) in the live FS, in a
// Clone and in a CrashClone.
func TestMemSharingAfterRename(t *testing.T) {
	t.Run("same directory", func(t *testing.T) {
		m := newMem(t)
		durable(t, m, "d/a", "v1")
		must(t, m.Rename("d/a", "d/b")) // not durable: d/a is the durable name
		update(t, m, "d/b", writeAt("v2", 0))
		update(t, m, "d/b", syncFile)
		if diff := cmp.Diff(map[string]string{"d/": "", "d/a": "v2"}, dump(t, m.CrashClone(), ".")); diff != "" {
			t.Errorf("sync through the new name, CrashClone (-want +got):\n%s", diff)
		}
		// In a Clone the two names still share one file.
		c := m.Clone()
		update(t, c, "d/b", writeAt("v3", 0))
		update(t, c, "d/b", syncFile)
		if diff := cmp.Diff(map[string]string{"d/": "", "d/a": "v3"}, dump(t, c.CrashClone(), ".")); diff != "" {
			t.Errorf("sync in Clone, its CrashClone (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"d/": "", "d/a": "v2"}, dump(t, m.CrashClone(), ".")); diff != "" {
			t.Errorf("original after the clone's sync, CrashClone (-want +got):\n%s", diff)
		}
	})
	t.Run("across directories", func(t *testing.T) {
		// d/a is durable; the rename to e/a is made durable in e only, so
		// after a crash both names exist: one file, two names.
		m := newMem(t)
		must(t, m.MkdirAll("e", 0o755))
		durable(t, m, "d/a", "v1")
		must(t, m.Rename("d/a", "e/a"))
		syncDir(t, m, "e")
		c := m.CrashClone()
		want := map[string]string{"d/": "", "d/a": "v1", "e/": "", "e/a": "v1"}
		if diff := cmp.Diff(want, dump(t, c, ".")); diff != "" {
			t.Fatalf("CrashClone (-want +got):\n%s", diff)
		}
		update(t, c, "d/a", writeAt("v2", 0))
		if got := readFile(t, c, "e/a"); got != "v2" {
			t.Errorf("e/a after a write through d/a in the crash clone = %q, want %q", got, "v2")
		}
	})
}

// TestMemRemovedWhileOpen checks that an open handle keeps working after
// its file is removed, as an unlinked inode does.
func TestMemRemovedWhileOpen(t *testing.T) {
	m := newMem(t)
	f, err := m.Create("d/f")
	must(t, err)
	defer mustClose(t, f)
	_, err = f.WriteAt([]byte("abc"), 0)
	must(t, err)
	must(t, m.Remove("d/f"))
	if _, err := m.Stat("d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after Remove = %v, want fs.ErrNotExist", err)
	}
	names, err := m.List("d")
	must(t, err)
	if diff := cmp.Diff([]string{}, names); diff != "" {
		t.Errorf("List after Remove (-want +got):\n%s", diff)
	}
	if _, err := f.WriteAt([]byte("def"), 3); err != nil {
		t.Errorf("WriteAt on a removed file: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Errorf("Sync on a removed file: %v", err)
	}
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abcdef" {
		t.Errorf("ReadAt on a removed file = %q, %v; want %q", buf, err, "abcdef")
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != 6 {
		t.Errorf("Stat on a removed file = %v, %v; want size 6", fi, err)
	}
	// The name is free for a new, unrelated file.
	createUnsynced(t, m, "d/f", "new")
	if got := readFile(t, m, "d/f"); got != "new" {
		t.Errorf("re-created file = %q, want %q", got, "new")
	}
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abcdef" {
		t.Errorf("ReadAt on the removed file after re-creating its name = %q, %v; want %q", buf, err, "abcdef")
	}
}

// TestMemCrashCloneDropsLocks checks that locks do not survive a crash, as
// flocks do not survive their process.
func TestMemCrashCloneDropsLocks(t *testing.T) {
	m := newMem(t)
	l, err := m.Lock("d/LOCK", true)
	must(t, err)
	defer mustClose(t, l)
	syncDir(t, m, "d")
	for _, c := range []*vfs.MemFS{m.CrashClone(), m.Clone()} {
		l2, err := c.Lock("d/LOCK", true)
		if err != nil {
			t.Fatalf("Lock in a clone: %v", err)
		}
		mustClose(t, l2)
	}
	if _, err := m.Lock("d/LOCK", true); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("Lock in the original after cloning = %v, want vfs.ErrLocked", err)
	}
}
