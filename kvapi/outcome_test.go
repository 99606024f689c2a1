package kvapi_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
	"github.com/kvstore/kv/vfs"
)

// TestLocalUnknownOutcome: a write the store failed (kv.ErrFailed: its
// log's fdatasync failed, so it may or may not be there after a reopen)
// matches kvapi.ErrUnknownOutcome through Local, Put and Add alike,
// still matching kv.ErrFailed; an error that proves nothing was written
// (kv.ErrFenced, kv.ErrNotFound) does not.
func TestLocalUnknownOutcome(t *testing.T) {
	var failSync atomic.Bool
	fs := &vfs.Inject{FS: vfs.NewMem(), Rule: func(op vfs.Op) error {
		if failSync.Load() && op.Kind == vfs.OpSync && strings.Contains(op.Path, "log.") {
			return syscall.EIO
		}
		return nil
	}}
	s, err := kv.Open("data", &kv.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db := kvapi.Local(s)
	ctx := context.Background()
	lockRev, err := kvapi.Put(ctx, db, []byte("lock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvapi.Fenced(db, kv.Fence{Key: []byte("lock"), Token: lockRev + 1}).Put(ctx, []byte("k"), nil); !errors.Is(err, kv.ErrFenced) || errors.Is(err, kvapi.ErrUnknownOutcome) {
		t.Errorf("a stale fence: %v, want kv.ErrFenced alone", err)
	}
	if _, err := kvapi.Delete(ctx, db, []byte("absent")); !errors.Is(err, kv.ErrNotFound) || errors.Is(err, kvapi.ErrUnknownOutcome) {
		t.Errorf("a delete of an absent key: %v, want kv.ErrNotFound alone", err)
	}
	failSync.Store(true)
	_, err = kvapi.Put(ctx, db, []byte("k"), []byte("v"))
	if !errors.Is(err, kvapi.ErrUnknownOutcome) || !errors.Is(err, kv.ErrFailed) {
		t.Fatalf("a put whose sync failed: %v, want kvapi.ErrUnknownOutcome and kv.ErrFailed", err)
	}
	if _, _, err := kvapi.Add(ctx, db, []byte("n"), 1); !errors.Is(err, kvapi.ErrUnknownOutcome) || !errors.Is(err, kv.ErrFailed) {
		t.Fatalf("an add on the failed store: %v, want kvapi.ErrUnknownOutcome and kv.ErrFailed", err)
	}
}
