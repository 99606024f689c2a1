package vfs_test

import (
	"os"
	"path/filepath"
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
