package filelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
)

// StoreLeaser returns the backend of an open store with leases: the
// adapter StoreBackend returns, and a lockstore.Leaser on the store's
// own leases (kv.Store.Grant), each of ttl and kept alive in this
// process (kv.Store.KeepAliveLoop) until revoked, until a renewal fails,
// or until the store closes. A Locker on it (NewBackend(StoreLeaser(s,
// ttl), "")) judges holders by the Lease strategy, as on etcd: a holder's
// slot key is bound to its Locker's lease, and the store itself deletes
// it once the lease ends, because the Locker was closed or its process
// stopped renewing (died, or paused past the TTL). The deadline is the
// store's, in its log: a restart of the store gives no grace, and a
// store opened after the deadline, by any process, deletes the key before
// any write (kv.Store.Grant). The store must stay open in this process,
// which renews; no holder files are kept.
func StoreLeaser(s *kv.Store, ttl time.Duration) lockstore.Backend {
	return storeLeaser{storeBackend: storeBackend{s}, ttl: ttl}
}

type storeLeaser struct {
	storeBackend
	ttl time.Duration
}

// Grant grants a lease of the backend's TTL and keeps it alive on a
// goroutine until Revoke, or until a renewal fails.
func (b storeLeaser) Grant(ctx context.Context) (lockstore.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := b.s.Grant(b.ttl)
	if err != nil {
		return nil, err
	}
	kctx, stop := context.WithCancel(context.Background())
	l := &storeLease{s: b.s, id: id, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		err := b.s.KeepAliveLoop(kctx, id)
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
	}()
	return l, nil
}

// storeLease is a lease of the store and its keep-alive.
type storeLease struct {
	s    *kv.Store
	id   kv.LeaseID
	stop context.CancelFunc
	done chan struct{}
	mu   sync.Mutex
	err  error // why the keep-alive ended
}

func (l *storeLease) ID() int64             { return int64(l.id) }
func (l *storeLease) Done() <-chan struct{} { return l.done }

func (l *storeLease) Revoke(ctx context.Context) error {
	l.stop()
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := l.s.Revoke(l.id)
	if errors.Is(err, kv.ErrLeaseNotFound) {
		return nil // it had ended already
	}
	return err
}

// leaseEndedErr matches both lockstore.ErrLeaseEnded and the store's
// kv.ErrLeaseNotFound.
type leaseEndedErr struct{ err error }

func (e leaseEndedErr) Error() string { return e.err.Error() }
func (e leaseEndedErr) Unwrap() []error {
	return []error{lockstore.ErrLeaseEnded, e.err}
}

// putOp is op as the store's operation: a put bound to op.Lease, a put,
// or a delete.
func putOp(op lockstore.Op) (kv.Op, error) {
	switch {
	case op.Delete && op.Lease != 0:
		return kv.Op{}, fmt.Errorf("%w: a delete on lease %d", ErrInvalid, op.Lease)
	case op.Delete:
		return kv.DeleteOp([]byte(op.Key)), nil
	case op.Lease < 0:
		return kv.Op{}, fmt.Errorf("%w: lease %d", ErrInvalid, op.Lease)
	}
	return kv.PutOp([]byte(op.Key), op.Value).WithLease(kv.LeaseID(op.Lease)), nil
}
