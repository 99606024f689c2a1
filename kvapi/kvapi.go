package kvapi

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
)

// KV is what applications and the lock library use of a store: point
// reads, ordered ranges, transactions with compares and fences, watches
// of the changes, and leases. Its methods are safe for concurrent use.
// Local implements it on the embedded store; the etcd module's adapter
// on an etcd cluster.
type KV interface {
	// Get returns key's entry, or kv.ErrNotFound when it is absent.
	Get(ctx context.Context, key []byte) (kv.Entry, error)
	// Range returns the entries with start <= key < end in key order, at
	// most limit of them, and the revision the read saw: the entries are
	// the state at that revision. A nil start starts at the first key, a
	// nil end means no upper bound, a limit of 0 means no limit.
	Range(ctx context.Context, start, end []byte, limit int) ([]kv.Entry, kv.Revision, error)
	// Txn commits t atomically, with kv.Store.Txn's semantics: a failed
	// fence is kv.ErrFenced and writes nothing, a failed compare is not
	// an error (Succeeded false, Else ran).
	Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error)
	// Watch yields every committed change to a key under prefix (every
	// key, for an empty prefix) at revision from or later, in revision
	// order, each once, none left out, as kv.Store.Watch does (the
	// package doc has the whole contract). A from of 0 means the next
	// revision to commit. The loop ends when its body breaks, or with a
	// final error: ctx's, kv.ErrClosed after Close, or a
	// *kv.CompactedError (matching kv.ErrCompacted) when from, or the
	// revision the loop needs next, is no longer held.
	Watch(ctx context.Context, prefix []byte, from kv.Revision, o *WatchOptions) iter.Seq2[kv.Event, error]
	// Grant creates a lease whose keys (bound by puts with
	// kv.Op.WithLease, or PutLease) are deleted when it ends: revoked, or
	// not renewed by KeepAlive for its TTL. It returns the lease: its ID,
	// the TTL granted (at least ttl; a backend may round it up) and a
	// Deadline the lease does not end before unless revoked. ttl must be
	// above 0 and at most kv.MaxLeaseTTL (kv.ErrInvalid).
	Grant(ctx context.Context, ttl time.Duration) (kv.LeaseInfo, error)
	// KeepAlive renews lease id once: it lives at least its TTL from
	// now. It returns the lease with its new Deadline, or an error
	// matching kv.ErrLeaseNotFound when the lease has ended.
	KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error)
	// Revoke ends lease id, deleting the keys bound to it in one
	// transaction, whose revision it returns (see the package doc for
	// a lease without keys); an error matching kv.ErrLeaseNotFound when
	// the lease has ended already.
	Revoke(ctx context.Context, id kv.LeaseID) (kv.Revision, error)
	// Close releases what the KV holds of its own (watches, leases); the
	// store or client it was made on stays open, for its owner to close.
	// Every method returns kv.ErrClosed after it, and a watch under way
	// ends with it.
	Close() error
}

// Adder is implemented by a KV that carries out an add in one call and
// learns the value it left: Local (kv.Store.Add, which logs the delta)
// and the etcd adapter (a compare-and-swap loop). Add and
// FencedWriter.Add use it; on a KV without it they run a
// compare-and-swap loop over Get and Txn.
type Adder interface {
	// Add adds delta to key's decimal int64 value (a missing key counts
	// as 0) under fence, if not nil, and returns the new value and the
	// revision it committed at; kv.ErrNotInteger or kv.ErrOverflow, and
	// nothing written, when it cannot.
	Add(ctx context.Context, key []byte, delta int64, fence *kv.Fence) (int64, kv.Revision, error)
}

// Put sets key to value and returns the revision it committed at.
func Put(ctx context.Context, db KV, key, value []byte) (kv.Revision, error) {
	return FencedWriter{db: db}.Put(ctx, key, value)
}

// Delete removes key and returns the revision it committed at, or
// kv.ErrNotFound, writing nothing, when key is absent (as
// kv.Store.Delete).
func Delete(ctx context.Context, db KV, key []byte) (kv.Revision, error) {
	return FencedWriter{db: db}.Delete(ctx, key)
}

// Add adds delta to key's value, a decimal int64 (a missing key counts
// as 0), and returns the new value and the revision it committed at. It
// fails with kv.ErrNotInteger or kv.ErrOverflow, writing nothing. The
// key keeps its lease, if bound to one. On a KV that is not an Adder it
// reads the key and commits the add under a compare on the key's mod
// revision (AddCAS), again while another write comes between; never
// again after an error.
func Add(ctx context.Context, db KV, key []byte, delta int64) (int64, kv.Revision, error) {
	return FencedWriter{db: db}.Add(ctx, key, delta)
}

// Fenced returns a writer whose writes commit only while fence holds,
// checked in the same atomic step as the write; otherwise they fail with
// kv.ErrFenced and write nothing (see kv.Fence).
func Fenced(db KV, fence kv.Fence) FencedWriter {
	return FencedWriter{db: db, fence: &fence}
}

// FencedWriter writes under a fencing token; its zero fence (from Put,
// Delete and Add) is none.
type FencedWriter struct {
	db    KV
	fence *kv.Fence
}

// Txn commits t under the writer's fence, which replaces t's.
func (w FencedWriter) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	if w.fence != nil {
		f := *w.fence
		t.Fence = &f
	}
	return w.db.Txn(ctx, t)
}

// Put is the package's Put under the fence.
func (w FencedWriter) Put(ctx context.Context, key, value []byte) (kv.Revision, error) {
	res, err := w.Txn(ctx, kv.Txn{Then: []kv.Op{kv.PutOp(key, value)}})
	return res.Revision, err
}

// Delete is the package's Delete under the fence; the fence is checked
// before the key's existence.
func (w FencedWriter) Delete(ctx context.Context, key []byte) (kv.Revision, error) {
	res, err := w.Txn(ctx, kv.Txn{
		If:   []kv.Compare{kv.Exists(key)},
		Then: []kv.Op{kv.DeleteOp(key)},
	})
	if err != nil {
		return 0, err
	}
	if !res.Succeeded {
		return 0, fmt.Errorf("%w: %q", kv.ErrNotFound, key)
	}
	return res.Revision, nil
}

// Add is the package's Add under the fence.
func (w FencedWriter) Add(ctx context.Context, key []byte, delta int64) (int64, kv.Revision, error) {
	if a, ok := w.db.(Adder); ok {
		return a.Add(ctx, key, delta, w.fence)
	}
	return AddCAS(ctx, w.db, key, delta, w.fence)
}

// AddCAS adds delta to key's value by compare-and-swap, for a KV that
// is not an Adder: it reads the key, computes the sum as the embedded
// store does (NextValue), and commits the add (kv.AddOp) under fence (if
// not nil) and a compare on the key's mod revision (0: still absent), so
// that the sum it computed is the one the add left. The add, not a put
// of the sum, keeps the key's lease. When that compare fails, another
// write came between: it reads again. It never retries after an error,
// whose outcome may be unknown.
func AddCAS(ctx context.Context, db KV, key []byte, delta int64, fence *kv.Fence) (int64, kv.Revision, error) {
	for {
		e, err := db.Get(ctx, key)
		var old *kv.Entry
		switch {
		case err == nil:
			old = &e
		case !errors.Is(err, kv.ErrNotFound):
			return 0, 0, err
		}
		v, _, err := NextValue(old, kv.AddOp(key, delta))
		if err != nil {
			return 0, 0, err
		}
		res, err := db.Txn(ctx, kv.Txn{
			Fence: fence,
			If:    []kv.Compare{kv.CompareModRev(key, kv.Equal, e.ModRev)},
			Then:  []kv.Op{kv.AddOp(key, delta)},
		})
		if err != nil {
			return 0, 0, err
		}
		if res.Succeeded {
			n, _ := record.ParseInt(v)
			return n, res.Revision, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
	}
}

// NextValue returns what op leaves in its key, which held old (nil when
// absent), as the embedded store computes it: the put's value, the sum
// of an add as decimal, or deleted. An add to a value that is not a
// decimal int64 fails with kv.ErrNotInteger, one past int64 with
// kv.ErrOverflow. It is for backends that carry out operations the
// store has and they lack.
func NextValue(old *kv.Entry, op kv.Op) (value []byte, deleted bool, err error) {
	e, err := record.Next(old, &op, 1)
	switch {
	case errors.Is(err, record.ErrNotInteger):
		return nil, false, fmt.Errorf("%w: key %q holds %q", kv.ErrNotInteger, op.Key, old.Value)
	case errors.Is(err, record.ErrOverflow):
		return nil, false, fmt.Errorf("%w: key %q holds %s, adding %d", kv.ErrOverflow, op.Key, old.Value, op.Delta)
	case err != nil:
		return nil, false, fmt.Errorf("%w: %w", kv.ErrInvalid, err)
	case e == nil:
		return nil, true, nil
	}
	return e.Value, false, nil
}
