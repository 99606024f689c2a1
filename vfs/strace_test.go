package vfs_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/vfs"
)

// syncChildEnv names the directory the child of TestOSSyncSyscalls works
// in; set, the test is that child.
const syncChildEnv = "KV_VFS_SYNC_CHILD_DIR"

// TestOSSyncSyscalls: on the OS file system a directory is synced with
// fsync (its entries are metadata, which fdatasync need not flush) and a
// file with fdatasync, through every path the store takes: Sync on a
// directory opened with OpenDir, SyncDir, and Publish (which syncs the
// temporary file, renames it and syncs the directory). The test runs
// itself in a child process under strace, which reports each system
// call with the path of its descriptor (-y), and reads the calls back:
// nothing is added to the product for it. It is skipped where strace is
// not installed or cannot trace (apt-get install strace).
func TestOSSyncSyscalls(t *testing.T) {
	if dir := os.Getenv(syncChildEnv); dir != "" {
		syncChild(t, dir)
		return
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: the system calls cannot be watched")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, "-f", "-y", "-e", "trace=fsync,fdatasync,syncfs,sync", "-o", out,
		os.Args[0], "-test.run=^TestOSSyncSyscalls$", "-test.count=1")
	cmd.Env = append(os.Environ(), syncChildEnv+"="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		if bytes.Contains(b, []byte("ptrace")) || bytes.Contains(b, []byte("Operation not permitted")) {
			t.Skipf("strace cannot trace here: %s", b)
		}
		t.Fatalf("the child under strace: %v\n%s", err, b)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Lines such as "1234  fsync(3</tmp/x/dir>)", or, when another
	// thread's line came between, "1234  fsync(3</tmp/x/dir> <unfinished
	// ...>" and a "resumed" line later: the call's start names the call
	// and the path. The child fails if a sync fails.
	re := regexp.MustCompile(`(?m)^(?:\d+\s+)?(fsync|fdatasync|syncfs|sync)\((?:\d+<([^>]*)>)?`)
	var calls []string
	for _, m := range re.FindAllStringSubmatch(string(trace), -1) {
		p, err := filepath.Rel(dir, m[2])
		if err != nil || filepath.IsAbs(p) || (len(p) > 1 && p[:2] == "..") {
			continue // not the test's directory: the test binary's own, if any
		}
		calls = append(calls, m[1]+" "+p)
	}
	want := []string{
		"fsync .",           // OpenDir, then Sync
		"fdatasync file",    // a file's Sync
		"fsync .",           // SyncDir
		"fdatasync pub.tmp", // Publish: the temporary file, before the rename
		"fsync .",           // Publish: the directory, after the rename
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("sync system calls in the test's directory (-want +got):\n%s\nstrace output:\n%s", diff, trace)
	}
}

// syncChild makes the OS file system sync a directory and files, in the
// order TestOSSyncSyscalls expects.
func syncChild(t *testing.T, dir string) {
	fsys := vfs.OS
	d, err := fsys.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	f, err := fsys.Create(filepath.Join(dir, "file"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := vfs.SyncDir(fsys, dir); err != nil {
		t.Fatal(err)
	}
	err = vfs.Publish(fsys, dir, "pub", func(w io.Writer) error {
		_, err := w.Write([]byte("published"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
