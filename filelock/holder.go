package filelock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
)

// Holder is a slot of a lock, held. Its methods are safe for concurrent
// use.
type Holder struct {
	l      *Locker
	name   string
	slot   int
	key    string
	token  int64
	file   *os.File
	lease  lockstore.Lease // under the Lease strategy
	mu     sync.Mutex
	marker Marker
	done   bool

	lostOnce  sync.Once
	lost      chan struct{}
	closeOnce sync.Once // closes lost once: the monitor, the lease watcher and Release may all find the loss
	monOnce   sync.Once
	stopMon   context.CancelFunc
}

// Token is the fencing token: the revision of the store transaction that
// granted the lock, which is the create revision of the lock's slot key.
// It is larger than every token handed out before, by any process, across
// every crash and repair of the store.
func (h *Holder) Token() int64 { return h.token }

// Name is the lock's name.
func (h *Holder) Name() string { return h.name }

// Slot is the slot held, 0 to n-1 under WithSlots(n).
func (h *Holder) Slot() int { return h.slot }

// Key is the slot key in the store: the fence key of fenced writes.
func (h *Holder) Key() string { return h.key }

// Marker is what the holder recorded in its slot key.
func (h *Holder) Marker() Marker {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.marker
}

// Fence is the fence of a write that must commit only while this holder
// holds the lock.
func (h *Holder) Fence() lockstore.Fence { return lockstore.Fence{Key: h.key, Token: h.token} }

// File is the holder file, kept locked for as long as the lock is held,
// or nil where the platform keeps none. Pass it to a child process
// (exec.Cmd.ExtraFiles) and the lock stays alive while the child runs,
// even if this process dies: the kernel lock goes with the open file.
func (h *Holder) File() *os.File { return h.file }

// Extend renews the holder's marker (its Renewed time), which keeps a
// judge that goes by time from finding it stale. It commits only while
// the slot key still has the holder's token as its create revision, and
// otherwise returns ErrLockLost.
func (h *Holder) Extend(ctx context.Context) error {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return ErrReleased
	}
	m := h.marker
	h.mu.Unlock()
	m.Renewed = time.Now()
	res, err := h.l.b.Txn(ctx, lockstore.Txn{
		If:   []lockstore.Compare{lockstore.CreateRevIs(h.key, h.token)},
		Then: []lockstore.Op{lockstore.Put(h.key, m.encode())},
	})
	if err != nil {
		return err
	}
	if !res.Succeeded {
		h.markLost()
		return fmt.Errorf("%w: lock %q, token %d", ErrLockLost, h.name, h.token)
	}
	h.mu.Lock()
	h.marker = m
	h.mu.Unlock()
	return nil
}

// releaseTimeout bounds Release's wait for the store.
const releaseTimeout = time.Minute

// Release gives the lock up: it deletes the slot key only if its create
// revision is still the holder's token, and otherwise returns ErrLockLost
// and deletes nothing (a holder that was taken over must not delete its
// successor's lock). Then it removes and closes the holder file. If the
// store cannot be reached, it returns the error and keeps the holder
// file locked; the lock is then free once this process exits.
func (h *Holder) Release() error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return h.ReleaseContext(ctx)
}

// ReleaseContext is Release with a context bounding the wait for the
// store.
func (h *Holder) ReleaseContext(ctx context.Context) error {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return ErrReleased
	}
	h.mu.Unlock()
	res, err := h.l.b.Txn(ctx, lockstore.Txn{
		If:   []lockstore.Compare{lockstore.CreateRevIs(h.key, h.token)},
		Then: []lockstore.Op{lockstore.Delete(h.key)},
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
	if h.stopMon != nil {
		h.stopMon()
	}
	if h.file != nil {
		// The key is gone (or another's): unlink, then close, which lets
		// go of the kernel lock and wakes the waiters watching the file.
		os.Remove(filepath.Join(h.l.holderDir, h.marker.HolderFile))
		h.file.Close()
	}
	if !res.Succeeded {
		h.markLost()
		return fmt.Errorf("%w: lock %q, token %d: the key has another holder, left as it is", ErrLockLost, h.name, h.token)
	}
	return nil
}

// monitorEvery bounds the time between two checks of the lock by Lost's
// monitor when no change is reported.
const monitorEvery = time.Second

// Lost returns a channel closed when a check finds the lock taken over
// (or swept): the slot key is gone or has another create revision, or,
// under the Lease strategy, when the holder's lease ended or its renewals
// stopped getting through. The first call starts the checks, which wait
// for the store's changes.
func (h *Holder) Lost() <-chan struct{} {
	h.lostOnce.Do(func() { h.lost = make(chan struct{}) })
	h.monOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		h.mu.Lock()
		h.stopMon = cancel
		done := h.done
		h.mu.Unlock()
		if done {
			cancel()
			return
		}
		go h.monitor(ctx)
		if h.lease != nil {
			go func() {
				select {
				case <-h.lease.Done():
					h.markLost()
				case <-ctx.Done():
				}
			}()
		}
	})
	return h.lost
}

func (h *Holder) markLost() {
	h.lostOnce.Do(func() { h.lost = make(chan struct{}) })
	h.closeOnce.Do(func() { close(h.lost) })
}

func (h *Holder) monitor(ctx context.Context) {
	for ctx.Err() == nil {
		kvs, rev, err := h.l.b.Range(ctx, h.key)
		if err == nil {
			found := false
			for _, e := range kvs {
				if e.Key == h.key && e.CreateRev == h.token {
					found = true
				}
			}
			if !found {
				h.markLost()
				return
			}
		}
		wctx, cancel := context.WithTimeout(ctx, monitorEvery)
		h.l.b.Wait(wctx, h.key, rev)
		cancel()
	}
}

// Txn commits t under the holder's fence: only while it holds the lock,
// else a *FencedError (ErrFenced, kv.ErrFenced) and nothing written.
func (h *Holder) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	fw := FencedWriter{l: h.l, name: h.name, token: h.token, key: h.key}
	return fw.Txn(ctx, t)
}

// Put sets key to value under the holder's fence.
func (h *Holder) Put(ctx context.Context, key string, value []byte) (int64, error) {
	res, err := h.Txn(ctx, lockstore.Txn{Then: []lockstore.Op{lockstore.Put(key, value)}})
	return res.Revision, err
}
