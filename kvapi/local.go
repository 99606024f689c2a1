package kvapi

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/kv"
)

// Local returns the KV of an open embedded store. Its writes are the
// store's (durable when they return under the default sync mode); a
// context that has ended fails a call before it starts, but cannot stop
// a write once queued. Close leaves the store open: its owner closes it.
func Local(s *kv.Store) KV {
	ctx, cancel := context.WithCancel(context.Background())
	return &local{s: s, done: ctx, close: cancel}
}

type local struct {
	s      *kv.Store
	closed atomic.Bool
	done   context.Context // ended by Close, ending the watches
	close  context.CancelFunc
}

// rangeTries bounds how often Range scans again when a commit lands
// between the revision it reads and the scan.
const rangeTries = 8

func (l *local) check(ctx context.Context) error {
	if l.closed.Load() {
		return kv.ErrClosed
	}
	return ctx.Err()
}

// outcome marks kv.ErrFailed, whose write may or may not be there after
// a reopen, as ErrUnknownOutcome.
func outcome(err error) error {
	if errors.Is(err, kv.ErrFailed) {
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	}
	return err
}

func (l *local) Get(ctx context.Context, key []byte) (kv.Entry, error) {
	if err := l.check(ctx); err != nil {
		return kv.Entry{}, err
	}
	return l.s.Get(key)
}

// Range scans the store's copy-on-write view and reads the store's
// revision before and after: when they agree, no commit became visible
// in between and the view is at that revision. A commit in between
// makes it scan again, rangeTries times at most; past that (a long
// range under a stream of writes) it returns the revision read before
// the scan, which is at or below the view's: a caller that waits for
// changes after it sees some twice, never misses one.
func (l *local) Range(ctx context.Context, start, end []byte, limit int) ([]kv.Entry, kv.Revision, error) {
	if err := l.check(ctx); err != nil {
		return nil, 0, err
	}
	if limit < 0 {
		return nil, 0, fmt.Errorf("%w: negative limit %d", kv.ErrInvalid, limit)
	}
	var out []kv.Entry
	var rev kv.Revision
	for range rangeTries {
		out = out[:0]
		rev = l.s.Revision()
		for e, err := range l.s.ScanErr(start, end) {
			if err != nil {
				return nil, 0, err
			}
			if limit > 0 && len(out) == limit {
				break
			}
			out = append(out, e)
		}
		if l.s.Revision() == rev {
			break
		}
	}
	return out, rev, nil
}

func (l *local) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	if err := l.check(ctx); err != nil {
		return kv.TxnResult{}, err
	}
	res, err := l.s.Txn(t)
	return res, outcome(err)
}

// Add is kv.Store.Add, or kv.FencedWriter.Add: one record that logs the
// delta.
func (l *local) Add(ctx context.Context, key []byte, delta int64, fence *kv.Fence) (int64, kv.Revision, error) {
	if err := l.check(ctx); err != nil {
		return 0, 0, err
	}
	var n int64
	var rev kv.Revision
	var err error
	if fence != nil {
		n, rev, err = l.s.Fenced(*fence).Add(key, delta)
	} else {
		n, rev, err = l.s.Add(key, delta)
	}
	return n, rev, outcome(err)
}

// Watch is kv.Store.Watch, ended by Close as well as by ctx.
func (l *local) Watch(ctx context.Context, prefix []byte, from kv.Revision, o *WatchOptions) iter.Seq2[kv.Event, error] {
	return func(yield func(kv.Event, error) bool) {
		if err := l.check(ctx); err != nil {
			yield(kv.Event{}, err)
			return
		}
		var opts []kv.WatchOption
		if o != nil && o.Prev {
			opts = append(opts, kv.WithPrev())
		}
		wctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(l.done, func() { cancel(kv.ErrClosed) })
		defer stop()
		for ev, err := range l.s.Watch(wctx, prefix, from, opts...) {
			if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), kv.ErrClosed) {
				err = kv.ErrClosed
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Grant is kv.Store.Grant; the lease's deadline is the one the store
// logged.
func (l *local) Grant(ctx context.Context, ttl time.Duration) (kv.LeaseInfo, error) {
	if err := l.check(ctx); err != nil {
		return kv.LeaseInfo{}, err
	}
	before := time.Now()
	id, err := l.s.Grant(ttl)
	if err != nil {
		return kv.LeaseInfo{}, outcome(err)
	}
	info, err := l.s.Lease(id)
	if err != nil {
		// Ended already (a TTL shorter than the call): its deadline
		// was at least the clock's before the grant plus ttl.
		return kv.LeaseInfo{ID: id, TTL: ttl, Deadline: before.Add(ttl)}, nil
	}
	info.Keys = nil
	return info, nil
}

// KeepAlive is kv.Store.KeepAlive.
func (l *local) KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error) {
	if err := l.check(ctx); err != nil {
		return kv.LeaseInfo{}, err
	}
	info, err := l.s.KeepAlive(id)
	return info, outcome(err)
}

// Revoke is kv.Store.Revoke.
func (l *local) Revoke(ctx context.Context, id kv.LeaseID) (kv.Revision, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	rev, err := l.s.Revoke(id)
	return rev, outcome(err)
}

func (l *local) Close() error {
	l.closed.Store(true)
	l.close()
	return nil
}
