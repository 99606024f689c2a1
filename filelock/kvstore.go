package filelock

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
)

// StoreBackend returns the lockstore.Backend of an open store: the thin
// adapter that lets the lock logic run on the kv store without reaching
// into it. The store's sync mode must be kv.Always (the default) for its
// revisions to be safe fencing tokens.
func StoreBackend(s *kv.Store) lockstore.Backend { return storeBackend{s} }

type storeBackend struct{ s *kv.Store }

// fencedErr matches both lockstore.ErrFenced and kv.ErrFenced.
type fencedErr struct{ err error }

func (e fencedErr) Error() string { return e.err.Error() }
func (e fencedErr) Unwrap() []error {
	return []error{lockstore.ErrFenced, e.err}
}

func copyKV(e kv.Entry) lockstore.KeyValue {
	return lockstore.KeyValue{
		Key:       string(e.Key),
		Value:     append([]byte(nil), e.Value...),
		CreateRev: int64(e.CreateRev),
		ModRev:    int64(e.ModRev),
	}
}

func (b storeBackend) Get(_ context.Context, key string) (lockstore.KeyValue, bool, error) {
	e, err := b.s.Get([]byte(key))
	if errors.Is(err, kv.ErrNotFound) {
		return lockstore.KeyValue{}, false, nil
	}
	if err != nil {
		return lockstore.KeyValue{}, false, err
	}
	return copyKV(e), true, nil
}

func (b storeBackend) Range(_ context.Context, prefix string) ([]lockstore.KeyValue, int64, error) {
	rev := int64(b.s.Revision())
	var out []lockstore.KeyValue
	for e := range b.s.ScanPrefix([]byte(prefix)) {
		out = append(out, copyKV(e))
	}
	// A write between Revision and the scan makes rev older than what the
	// scan saw: a caller waiting for a change after rev then returns at
	// once and reads again, which is allowed; the other order could miss
	// a change.
	return out, rev, nil
}

func (b storeBackend) Txn(_ context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	var kt kv.Txn
	for _, c := range t.If {
		k := []byte(c.Key)
		switch c.Target {
		case lockstore.TargetCreateRev:
			kt.If = append(kt.If, kv.CompareCreateRev(k, kv.Equal, kv.Revision(c.Rev)))
		case lockstore.TargetModRev:
			kt.If = append(kt.If, kv.CompareModRev(k, kv.Equal, kv.Revision(c.Rev)))
		case lockstore.TargetExists:
			if c.Rev == 0 {
				kt.If = append(kt.If, kv.Absent(k))
			} else {
				kt.If = append(kt.If, kv.Exists(k))
			}
		default:
			return lockstore.TxnResult{}, fmt.Errorf("%w: compare target %d", ErrInvalid, c.Target)
		}
	}
	for _, op := range t.Then {
		kop, err := putOp(op) // a put on a lease: see StoreLeaser
		if err != nil {
			return lockstore.TxnResult{}, err
		}
		kt.Then = append(kt.Then, kop)
	}
	if t.Fence != nil {
		kt.Fence = &kv.Fence{Key: []byte(t.Fence.Key), Token: kv.Revision(t.Fence.Token)}
	}
	if len(kt.Then) == 0 && kt.Fence == nil && len(kt.If) == 0 {
		return lockstore.TxnResult{Revision: int64(b.s.Revision())}, nil
	}
	res, err := b.s.Txn(kt)
	if errors.Is(err, kv.ErrFenced) {
		return lockstore.TxnResult{}, fencedErr{err}
	}
	if errors.Is(err, kv.ErrLeaseNotFound) {
		return lockstore.TxnResult{}, leaseEndedErr{err}
	}
	return lockstore.TxnResult{Succeeded: res.Succeeded, Revision: int64(res.Revision)}, err
}

// Wait watches the store (Store.Watch) for a change of a key under prefix
// after rev.
func (b storeBackend) Wait(ctx context.Context, prefix string, rev int64) error {
	return waitWatch(b.s.Watch(ctx, []byte(prefix), kv.Revision(rev+1)))
}

// waitWatch returns nil at the watch's first change, and at its
// compaction (the changes after rev are no longer held: something
// changed, a spurious return is allowed); the watch's error otherwise.
func waitWatch(w iter.Seq2[kv.Event, error]) error {
	for _, err := range w {
		if errors.Is(err, kv.ErrCompacted) {
			return nil
		}
		return err
	}
	return nil
}

// StoreFence returns the fence of a fenced write on s under lock name
// and token: the key of the lock's slot whose create revision is token.
// When no slot has it (the token is stale), it returns the fence of
// slot 0 with the token, which no write passes: the write then fails
// with kv.ErrFenced in its own atomic step, as any stale write does.
func StoreFence(s *kv.Store, name string, token int64) (kv.Fence, error) {
	if err := CheckName(name); err != nil {
		return kv.Fence{}, err
	}
	key := slotKey(name, 0)
	for e := range s.ScanPrefix([]byte(slotPrefix(name))) {
		if int64(e.CreateRev) == token {
			key = string(e.Key)
			break
		}
	}
	return kv.Fence{Key: []byte(key), Token: kv.Revision(token)}, nil
}
