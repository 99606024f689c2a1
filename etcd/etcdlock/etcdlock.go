package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// DefaultTTL is the lease TTL of a Backend whose Options give none.
const DefaultTTL = 10 * time.Second

// Options configure a Backend. The zero value is valid.
type Options struct {
	// TTL is the lease of each Locker's holders: how long a holder that
	// stopped renewing it (dead, paused, cut off) keeps its slot. Whole
	// seconds, at least the cluster's minimum (1.5 election timeouts);
	// DefaultTTL if 0.
	TTL time.Duration
}

// Backend is lockstore.Backend and lockstore.Leaser on an etcd cluster.
type Backend struct {
	c   *clientv3.Client
	kv  *etcdkv.KV // its watches wake the waiters
	ttl int64      // seconds
}

var (
	_ lockstore.Backend = (*Backend)(nil)
	_ lockstore.Leaser  = (*Backend)(nil)
)

// NewBackend returns the backend of the cluster c talks to; c stays the
// caller's. A nil o is the zero Options.
func NewBackend(c *clientv3.Client, o *Options) *Backend {
	ttl := DefaultTTL
	if o != nil && o.TTL > 0 {
		ttl = o.TTL
	}
	return &Backend{c: c, kv: etcdkv.New(c, nil), ttl: int64(math.Ceil(ttl.Seconds()))}
}

// NewLocker returns a filelock.Locker on the cluster c talks to, whose
// holders are judged by their lease (filelock.Lease) unless opts say
// otherwise. Close it to revoke the lease.
func NewLocker(c *clientv3.Client, o *Options, opts ...filelock.Option) (*filelock.Locker, error) {
	return filelock.NewBackend(NewBackend(c, o), "", opts...)
}

// fencedErr matches lockstore.ErrFenced and kv.ErrFenced.
type fencedErr struct{ msg string }

func (e fencedErr) Error() string { return e.msg }
func (e fencedErr) Is(target error) bool {
	return target == lockstore.ErrFenced || target == kv.ErrFenced
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("etcdlock: %w", err)
}

// txnErr wraps the error of a transaction: a put under a lease that has
// ended is lockstore.ErrLeaseEnded (etcd refused the whole transaction).
func txnErr(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
		return fmt.Errorf("etcdlock: %w: %w", lockstore.ErrLeaseEnded, err)
	}
	return wrap(err)
}

// Get reads key with a linearizable read.
func (b *Backend) Get(ctx context.Context, key string) (lockstore.KeyValue, bool, error) {
	resp, err := b.c.Get(ctx, key)
	if err != nil {
		return lockstore.KeyValue{}, false, wrap(err)
	}
	if len(resp.Kvs) == 0 {
		return lockstore.KeyValue{}, false, nil
	}
	e := resp.Kvs[0]
	return lockstore.KeyValue{Key: string(e.Key), Value: e.Value, CreateRev: e.CreateRevision, ModRev: e.ModRevision}, true, nil
}

// Range reads the keys under prefix and the revision they were read at.
func (b *Backend) Range(ctx context.Context, prefix string) ([]lockstore.KeyValue, int64, error) {
	resp, err := b.c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, wrap(err)
	}
	out := make([]lockstore.KeyValue, len(resp.Kvs))
	for i, e := range resp.Kvs {
		out[i] = lockstore.KeyValue{Key: string(e.Key), Value: e.Value, CreateRev: e.CreateRevision, ModRev: e.ModRevision}
	}
	return out, resp.Header.Revision, nil
}

func compares(t *lockstore.Txn) ([]clientv3.Cmp, error) {
	var out []clientv3.Cmp
	for _, c := range t.If {
		switch c.Target {
		case lockstore.TargetCreateRev:
			out = append(out, clientv3.Compare(clientv3.CreateRevision(c.Key), "=", c.Rev))
		case lockstore.TargetModRev:
			out = append(out, clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.Rev))
		case lockstore.TargetExists:
			if c.Rev == 0 {
				out = append(out, clientv3.Compare(clientv3.CreateRevision(c.Key), "=", 0))
			} else {
				out = append(out, clientv3.Compare(clientv3.CreateRevision(c.Key), ">", 0))
			}
		default:
			return nil, fmt.Errorf("%w: compare target %d", filelock.ErrInvalid, c.Target)
		}
	}
	return out, nil
}

func op(o lockstore.Op) clientv3.Op {
	if o.Delete {
		return clientv3.OpDelete(o.Key)
	}
	if o.Lease != 0 {
		return clientv3.OpPut(o.Key, string(o.Value), clientv3.WithLease(clientv3.LeaseID(o.Lease)))
	}
	return clientv3.OpPut(o.Key, string(o.Value))
}

// Txn commits t as an etcd transaction: the fence, when set, is a level
// of its own around t's compares, so that a failed fence is
// lockstore.ErrFenced (and kv.ErrFenced) and a failed compare is
// Succeeded false. A put of a key that an earlier operation of t deletes
// (a takeover) is sent as a second transaction, under Absent, once the
// first committed: etcd refuses both in one.
func (b *Backend) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	cmps, err := compares(&t)
	if err != nil {
		return lockstore.TxnResult{}, err
	}
	var first, recreate []clientv3.Op
	var recreateCmps []clientv3.Cmp
	deleted, written := map[string]bool{}, map[string]bool{}
	for _, o := range t.Then {
		if written[o.Key] && !deleted[o.Key] || written[o.Key] && o.Delete {
			return lockstore.TxnResult{}, fmt.Errorf("%w: key %q written twice in one transaction", filelock.ErrInvalid, o.Key)
		}
		written[o.Key] = true
		if !o.Delete && deleted[o.Key] {
			recreate = append(recreate, op(o))
			recreateCmps = append(recreateCmps, clientv3.Compare(clientv3.CreateRevision(o.Key), "=", 0))
			continue
		}
		if o.Delete {
			deleted[o.Key] = true
		}
		first = append(first, op(o))
	}
	var resp *clientv3.TxnResponse
	if f := t.Fence; f != nil {
		fence := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(f.Key), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Token),
		}
		resp, err = b.c.Txn(ctx).If(fence...).Then(clientv3.OpTxn(cmps, first, nil)).Commit()
		if err == nil && !resp.Succeeded {
			return lockstore.TxnResult{}, fencedErr{fmt.Sprintf("etcdlock: fence key %q no longer created at revision %d: %v", f.Key, f.Token, lockstore.ErrFenced)}
		}
	} else {
		resp, err = b.c.Txn(ctx).If(cmps...).Then(first...).Commit()
	}
	if err != nil {
		return lockstore.TxnResult{}, txnErr(err)
	}
	succeeded := resp.Succeeded
	if t.Fence != nil {
		succeeded = resp.Responses[0].GetResponseTxn().Succeeded
	}
	res := lockstore.TxnResult{Succeeded: succeeded, Revision: resp.Header.Revision}
	if !succeeded || len(recreate) == 0 {
		return res, nil
	}
	resp, err = b.c.Txn(ctx).If(recreateCmps...).Then(recreate...).Commit()
	if err != nil {
		return lockstore.TxnResult{}, txnErr(err)
	}
	return lockstore.TxnResult{Succeeded: resp.Succeeded, Revision: resp.Header.Revision}, nil
}

// Wait watches prefix from rev+1 with kvapi's watch (etcdkv.KV.Watch)
// and returns at the first change, at once when rev+1 is compacted (a
// change it cannot see may have happened), or with ctx's error. The
// watch misses no change: a member that loses its leader ends it, and it
// starts again on one that has one, from where it was.
func (b *Backend) Wait(ctx context.Context, prefix string, rev int64) error {
	for _, err := range b.kv.Watch(ctx, []byte(prefix), kv.Revision(rev+1), nil) {
		if errors.Is(err, kv.ErrCompacted) {
			return nil
		}
		return err // nil: a change
	}
	return ctx.Err()
}

// Grant grants a lease of the backend's TTL (kvapi's Grant, on
// etcdkv) and keeps it alive through kvapi's KeepAlive (keepAlive)
// until Revoke, or until renewals stop getting through for the TTL.
func (b *Backend) Grant(ctx context.Context) (lockstore.Lease, error) {
	info, err := b.kv.Grant(ctx, time.Duration(b.ttl)*time.Second)
	if err != nil {
		return nil, wrap(err)
	}
	kctx, stop := context.WithCancel(context.Background())
	l := &lease{b: b, id: clientv3.LeaseID(info.ID), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		keepAlive(kctx, b.kv, info)
	}()
	return l, nil
}

// retryEvery is how soon keepAlive tries a renewal again after one
// whose outcome is unknown (a timeout, a member without a leader).
const retryEvery = 100 * time.Millisecond

// keepAlive renews lease info through db's KeepAlive every third of its
// TTL, as kvapi.KeepAliveLoop does, but rides out renewals that fail for
// a while: one that fails for another reason than the lease's end is
// tried again every retryEvery, each bounded by the deadline of the last
// renewal that got through. It returns when ctx ends, when the lease is
// not found (it ended), or at that deadline with no renewal through
// (the lease may have ended: its holders must assume it did).
func keepAlive(ctx context.Context, db kvapi.KV, info kv.LeaseInfo) {
	deadline, wait := info.Deadline, info.TTL/3
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		next, err := db.KeepAlive(rctx, info.ID)
		cancel()
		switch {
		case err == nil:
			deadline, wait = next.Deadline, max(next.TTL/3, retryEvery)
		case ctx.Err() != nil, errors.Is(err, kv.ErrLeaseNotFound), !time.Now().Before(deadline):
			return
		default:
			wait = retryEvery
		}
		t.Reset(wait)
	}
}

// lease is a granted etcd lease and its keep-alive.
type lease struct {
	b    *Backend
	id   clientv3.LeaseID
	stop context.CancelFunc
	done chan struct{}
}

func (l *lease) ID() int64             { return int64(l.id) }
func (l *lease) Done() <-chan struct{} { return l.done }

func (l *lease) Revoke(ctx context.Context) error {
	l.stop()
	_, err := l.b.c.Revoke(ctx, l.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil // it had ended already
	}
	return wrap(err)
}
