package filelock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/filelock/locktest"
	"github.com/kvstore/kv/internal/fakeclock"
	"github.com/kvstore/kv/kv"
)

// TestSuiteStoreLeases runs the acceptance suite on lockers of a store
// this process keeps open, judged by the store's leases (StoreLeaser):
// the Lease strategy that etcd's backend gives, on the embedded store. A
// killed holder's Locker is closed, which revokes its lease: the store
// deletes its keys by itself.
func TestSuiteStoreLeases(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locktest.Env {
		s, err := kv.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		b := filelock.StoreLeaser(s, 5*time.Second)
		return locktest.Env{
			Backend: b,
			New:     func(opts ...filelock.Option) (*filelock.Locker, error) { return filelock.NewBackend(b, "", opts...) },
			NewOn: func(b lockstore.Backend, opts ...filelock.Option) (*filelock.Locker, error) {
				return filelock.NewBackend(b, "", opts...)
			},
			Kill:         func(l *filelock.Locker, _ *filelock.Holder) { l.Close() },
			SelfCleaning: true,
		}
	})
}

// TestStoreLeaseExpires: a holder whose renewals stop (its process
// paused past the TTL: here the store's clock jumps past it) loses its
// lock when the lease's deadline passes: the store deletes the slot key
// by itself, the holder's Lost fires, and another Locker acquires.
func TestStoreLeaseExpires(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := kv.Open(t.TempDir(), &kv.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := filelock.StoreLeaser(s, 3*time.Second)
	l, err := filelock.NewBackend(b, "")
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.TryAcquire("job")
	if err != nil {
		t.Fatal(err)
	}
	if h.Marker().Lease == 0 || h.Marker().HolderFile != "" {
		t.Fatalf("marker %+v: want a lease and no holder file", h.Marker())
	}
	if _, ok, _ := b.Get(t.Context(), filelock.KeyPrefix+"job/slot/0"); !ok {
		t.Fatal("no slot key while held")
	}
	other, err := filelock.NewBackend(filelock.StoreLeaser(s, 3*time.Second), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryAcquire("job"); !errors.Is(err, filelock.ErrLocked) {
		t.Fatalf("a second locker while the first renews: %v", err)
	}
	lost := h.Lost()
	clk.Advance(3 * time.Second) // the deadline, before any renewal gets in
	select {
	case <-lost:
	case <-time.After(20 * time.Second):
		t.Fatal("the holder was not told it lost the lock")
	}
	key := filelock.KeyPrefix + "job/slot/0"
	if _, ok, err := b.Get(t.Context(), key); err != nil || ok {
		t.Errorf("the slot key %s after the deadline: present %v, %v", key, ok, err)
	}
	h2, err := other.TryAcquire("job")
	if err != nil {
		t.Fatalf("a second locker after the first's lease expired: %v", err)
	}
	if h2.Token() <= h.Token() {
		t.Errorf("token %d after %d", h2.Token(), h.Token())
	}
	other.Close()
}
