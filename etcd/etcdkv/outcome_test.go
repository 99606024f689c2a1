package etcdkv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// TestUnknownOutcome: with every member paused, a put times out with
// an error matching kvapi.ErrUnknownOutcome and the context's deadline
// (the put may have reached a member), a read with one that does not
// match it; kv.ErrNotFound and kv.ErrFenced, which prove nothing was
// written, never match it.
func TestUnknownOutcome(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	db := etcdkv.New(cluster.ClientForTest(t, c), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
	for _, m := range c.Members {
		m.Stop()
	}
	t.Cleanup(func() {
		for _, m := range c.Members {
			m.Cont()
		}
	})
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	_, err = kvapi.Put(pctx, db, []byte("k"), []byte("v"))
	pcancel()
	if !errors.Is(err, kvapi.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a put to a paused cluster: %v, want kvapi.ErrUnknownOutcome and context.DeadlineExceeded", err)
	}
	gctx, gcancel := context.WithTimeout(ctx, time.Second)
	_, err = db.Get(gctx, []byte("k"))
	gcancel()
	if err == nil || errors.Is(err, kvapi.ErrUnknownOutcome) {
		t.Errorf("a get from a paused cluster: %v, want an error that is not ErrUnknownOutcome", err)
	}
}
