package vfs_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvstore/kv/vfs"
)

// TestLockWait: a waiter gets the lock once its holder lets it go; one
// whose context ends first gets an error matching ErrLocked and the
// context's, and leaves no hold behind once the holder lets go.
func TestLockWait(t *testing.T) {
	for _, c := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"os", vfs.OS, t.TempDir()}, {"mem", vfs.NewMem(), "/d"}} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.fs.MkdirAll(c.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(c.dir, "LOCK")
			held, err := c.fs.Lock(name, true)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := vfs.LockWait(ctx, c.fs, name, true); !errors.Is(err, vfs.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("LockWait beside a holder until its deadline: %v, want ErrLocked and DeadlineExceeded", err)
			}
			got := make(chan error, 1)
			go func() {
				f, err := vfs.LockWait(context.Background(), c.fs, name, true)
				if err == nil {
					err = f.Close()
				}
				got <- err
			}()
			select {
			case err := <-got:
				t.Fatalf("LockWait returned %v while the lock was held", err)
			case <-time.After(20 * time.Millisecond):
			}
			if err := held.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("LockWait after the holder let go: %v", err)
			}
			// The waiter that gave up took the lock when it was let go,
			// if it was still in flock, and let it go at once.
			for i := 0; ; i++ {
				f, err := c.fs.Lock(name, true)
				if err == nil {
					f.Close()
					break
				}
				if i == 1000 {
					t.Fatalf("the lock stays taken after every waiter is done: %v", err)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
