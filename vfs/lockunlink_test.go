package vfs_test

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// TestLockSurvivesUnlink: a holder that unlinks the lock file before it
// lets go of it (an open that failed to create a store removes its LOCK)
// never leaves another process holding a lock on the unlinked file while
// a third locks the new one: Lock returns only a lock on the file that is
// under the name. Without the check, the second locker sometimes wins the
// flock of the file the first one had open, after its unlink.
func TestLockSurvivesUnlink(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	const rounds = 3000
	var wg sync.WaitGroup
	orphans := 0
	var mu sync.Mutex
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				f, err := vfs.OS.Lock(name, true)
				if err != nil {
					continue // the other one holds it
				}
				held, err1 := f.Stat()
				named, err2 := os.Stat(name)
				if err1 != nil || err2 != nil || !os.SameFile(held, named) {
					mu.Lock()
					orphans++
					mu.Unlock()
				}
				if w == 0 {
					os.Remove(name) // the holder unlinks before it closes
				}
				f.Close()
			}
		}()
	}
	wg.Wait()
	if orphans > 0 {
		t.Errorf("%d locks were held on a lock file no longer under its name", orphans)
	}
}

// TestLockHolder: on Linux the OS names the holder of a lock from
// /proc/locks, exclusive or shared, and no one once it is let go;
// elsewhere, and on any other FS, LockHolder names no one.
func TestLockHolder(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	if got := vfs.NamesLockHolders(vfs.OS); got != (runtime.GOOS == "linux") {
		t.Fatalf("NamesLockHolders(OS) = %v on %s", got, runtime.GOOS)
	}
	if vfs.NamesLockHolders(vfs.NewMem()) {
		t.Error("NamesLockHolders(Mem) = true")
	}
	for _, exclusive := range []bool{true, false} {
		f, err := vfs.OS.Lock(name, exclusive)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if vfs.NamesLockHolders(vfs.OS) {
			want = os.Getpid()
		}
		if got := vfs.LockHolder(vfs.OS, name); got != want {
			t.Errorf("exclusive=%v: LockHolder = %d, want %d", exclusive, got, want)
		}
		f.Close()
		if got := vfs.LockHolder(vfs.OS, name); got != 0 {
			t.Errorf("exclusive=%v: LockHolder after Close = %d, want 0", exclusive, got)
		}
	}
	if got := vfs.LockHolder(vfs.OS, filepath.Join(filepath.Dir(name), "missing")); got != 0 {
		t.Errorf("LockHolder of a missing file = %d", got)
	}
}
