package variant

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvstore/kv/vfs"
)

func TestParseAll(t *testing.T) {
	needVariants(t)
	for _, s := range []string{"", "none"} {
		if b, err := Parse(s); err != nil || b != None {
			t.Errorf("Parse(%q) = %q, %v; want None", s, b, err)
		}
	}
	seen := map[Bug]bool{}
	for _, b := range All() {
		if seen[b] {
			t.Errorf("All lists %q twice", b)
		}
		seen[b] = true
		got, err := Parse(string(b))
		if err != nil || got != b {
			t.Errorf("Parse(%q) = %q, %v", b, got, err)
		}
	}
	_, err := Parse("no-such-bug")
	if err == nil || !strings.Contains(err.Error(), string(NoSync)) {
		t.Errorf("Parse of an unknown name: %v; want an error listing the known ones", err)
	}
}

func TestWrapCarries(t *testing.T) {
	needVariants(t)
	fsys := vfs.NewMem()
	if Wrap(fsys, None) != vfs.FS(fsys) {
		t.Error("Wrap(None) is not the file system itself")
	}
	if Of(fsys) != None {
		t.Error("a plain file system carries a variant")
	}
	for _, b := range All() {
		if got := Of(Wrap(fsys, b)); got != b {
			t.Errorf("Of(Wrap(%q)) = %q", b, got)
		}
	}
}

// syncCounter counts the syncs that reach the file system below a variant.
type syncCounter struct {
	vfs.FS
	syncs map[string]int
}

type countedFile struct {
	vfs.File
	c    *syncCounter
	name string
}

func (c *syncCounter) count(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c, name: name}, nil
}

func (c *syncCounter) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	return c.count(name, f, err)
}

func (c *syncCounter) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name)
	return c.count(name, f, err)
}

func (c *syncCounter) OpenDir(name string) (vfs.File, error) {
	f, err := c.FS.OpenDir(name)
	return c.count(name, f, err)
}

func (f *countedFile) Sync() error {
	f.c.syncs[f.name]++
	return f.File.Sync()
}

// TestSyncVariants shows each sync-dropping variant dropping, or
// misplacing, the sync it is for and no other.
func TestSyncVariants(t *testing.T) {
	needVariants(t)
	run := func(b Bug) map[string]int {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("d", 0o755); err != nil {
			t.Fatal(err)
		}
		c := &syncCounter{FS: mem, syncs: map[string]int{}}
		fsys := Wrap(c, b)
		log, err := fsys.Create("d/log.0000000000000001")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, log, 0, []byte{1, 0, 0, 0}) // a header record
		mustSync(t, log)
		mustWrite(t, log, 4, []byte{2, 0, 0, 0}) // a data record
		mustSync(t, log)
		tmp, err := fsys.Create("d/snapshot.tmp")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, tmp, 0, []byte("snap"))
		mustSync(t, tmp)
		tmp.Close()
		countBefore := c.syncs["d/snapshot"]
		if err := fsys.Rename("d/snapshot.tmp", "d/snapshot"); err != nil {
			t.Fatal(err)
		}
		c.syncs["renamed"] = c.syncs["d/snapshot"] - countBefore
		dir, err := fsys.OpenDir("d")
		if err != nil {
			t.Fatal(err)
		}
		mustSync(t, dir)
		return c.syncs
	}
	base := run(None)
	want := map[string]int{"d/log.0000000000000001": 2, "d/snapshot.tmp": 1, "d": 1}
	for k, n := range want {
		if base[k] != n {
			t.Fatalf("correct store: %d syncs of %s, want %d (%v)", base[k], k, n, base)
		}
	}
	if got := run(NoSync)["d/log.0000000000000001"]; got != 1 {
		t.Errorf("no-sync: %d log syncs reach the disk, want 1 (the header's)", got)
	}
	if got := run(NoDirSync)["d"]; got != 0 {
		t.Errorf("no-dirsync: %d directory syncs reach the disk, want 0", got)
	}
	rb := run(RenameBeforeFsync)
	if rb["d/snapshot.tmp"] != 0 || rb["renamed"] != 1 {
		t.Errorf("rename-before-fsync: tmp synced %d times before rename, %d after; want 0 and 1", rb["d/snapshot.tmp"], rb["renamed"])
	}
}

// failOnce fails the first sync of every file.
type failOnce struct {
	vfs.FS
	failed bool
}

type failOnceFile struct {
	vfs.File
	fs *failOnce
}

func (f *failOnce) Create(name string) (vfs.File, error) {
	g, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &failOnceFile{File: g, fs: f}, nil
}

var errSync = errors.New("sync failed")

func (f *failOnceFile) Sync() error {
	if !f.fs.failed {
		f.fs.failed = true
		return errSync
	}
	return f.File.Sync()
}

func TestRetrySync(t *testing.T) {
	needVariants(t)
	for _, b := range []Bug{None, RetrySync} {
		fsys := Wrap(&failOnce{FS: vfs.NewMem()}, b)
		f, err := fsys.Create("log.0000000000000001")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, 0, []byte{2})
		err = f.Sync()
		if b == None && !errors.Is(err, errSync) {
			t.Errorf("correct store: a failed sync returns %v", err)
		}
		if b == RetrySync && err != nil {
			t.Errorf("retry-fsync: the retried sync returns %v, want nil (the defect)", err)
		}
	}
}

func mustWrite(t *testing.T, f vfs.File, off int64, p []byte) {
	t.Helper()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t *testing.T, f vfs.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func needVariants(t *testing.T) {
	if !Enabled {
		t.Skip("a kvrelease build has no bug variants")
	}
}

// TestRelease shows that a kvrelease build has no way to switch one on.
func TestRelease(t *testing.T) {
	if Enabled {
		t.Skip("run with -tags kvrelease")
	}
	for _, b := range All() {
		if _, err := Parse(string(b)); err == nil {
			t.Errorf("Parse(%q) succeeds in a release build", b)
		}
		fsys := vfs.NewMem()
		if w := Wrap(fsys, b); w != vfs.FS(fsys) || Of(w) != None {
			t.Errorf("Wrap(%q) carries a variant in a release build", b)
		}
	}
}
