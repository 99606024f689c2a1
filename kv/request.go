package kv

import (
	"fmt"
	"sync"

	"github.com/kvstore/kv/record"
)

// request is one write waiting for the committer.
type request struct {
	txn       Txn
	single    bool // a plain write, logged as a one-operation record
	mustExist bool // a plain Delete: ErrNotFound when the key is absent
	res       TxnResult
	added     int64 // the value after a plain Add
	err       error
	// done is closed when the outcome is set, or, for a pooled request,
	// receives one value.
	done   chan struct{}
	pooled bool
	one    [1]Op // the operation of a plain write
	// lease, when set, makes this a lease operation (lease.go), with an
	// empty txn; internal marks one the committer made itself (an
	// expiry), which no writer waits for.
	lease    *leaseReq
	internal bool
}

// requests recycles the requests of the writes that wait for their
// outcome (Put, Delete, Add, Txn), each with its channel: a busy store
// would otherwise allocate three objects per write.
var requests = sync.Pool{New: func() any {
	return &request{done: make(chan struct{}, 1), pooled: true}
}}

func newRequest() *request { return requests.Get().(*request) }

// release returns a pooled request once its writer has read the outcome.
// The committer is done with it: it sets the outcome before it signals
// done and touches the request no more.
func (r *request) release() {
	*r = request{done: r.done, pooled: true}
	requests.Put(r)
}

// finish tells the writer that the outcome is set.
func (r *request) finish() {
	if r.pooled {
		r.done <- struct{}{}
		return
	}
	close(r.done)
}

// write submits r to the committer and waits for its outcome.
func (s *Store) write(r *request) error {
	s.writers.Add(1)
	defer s.leave()
	if err := s.enqueue(r); err != nil {
		return err
	}
	<-r.done
	return r.err
}

// leave ends a write: a committer waiting for this writer to come back
// learns, at its next poll, that it will not (see gather).
func (sh *shared) leave() { sh.writers.Add(-1) }

// enqueue validates r and hands it to the committer.
func (s *Store) enqueue(r *request) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := s.check(r); err != nil {
		return err
	}
	if f := s.failed.Load(); f != nil {
		return fmt.Errorf("%w: %w", ErrFailed, *f)
	}
	if !r.pooled {
		r.done = make(chan struct{})
	}
	s.closeMu.RLock()
	if s.closed.Load() {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	s.c.ensureStarted()
	s.reqs <- r
	s.closeMu.RUnlock()
	return nil
}

// check validates a request before it is queued.
func (s *Store) check(r *request) error {
	t := &r.txn
	maxK, maxV := s.opts.maxKey(), s.opts.maxValue()
	key := func(k []byte) error {
		if len(k) == 0 {
			return fmt.Errorf("%w: empty key", ErrInvalid)
		}
		if len(k) > maxK {
			return fmt.Errorf("%w: key of %d bytes, limit %d", ErrTooLarge, len(k), maxK)
		}
		return nil
	}
	for _, ops := range [][]Op{t.Then, t.Else} {
		for i := range ops {
			op := &ops[i]
			if err := key(op.Key); err != nil {
				return err
			}
			switch op.Kind {
			case record.KindPut:
				if len(op.Value) > maxV {
					return fmt.Errorf("%w: value of %d bytes, limit %d", ErrTooLarge, len(op.Value), maxV)
				}
			case record.KindDelete, record.KindAdd:
				if op.Lease != 0 {
					return fmt.Errorf("%w: a %s on a lease: only a put binds a key to a lease", ErrInvalid, op.Kind)
				}
			default:
				return fmt.Errorf("%w: unknown operation kind %d", ErrInvalid, op.Kind)
			}
		}
	}
	for i := range t.If {
		c := &t.If[i]
		if err := key(c.Key); err != nil {
			return err
		}
		if c.Target < record.TargetValue || c.Target > record.TargetExists || c.Cmp < record.CmpEqual || c.Cmp > record.CmpGreater {
			return fmt.Errorf("%w: malformed compare", ErrInvalid)
		}
	}
	if t.Fence != nil {
		if err := key(t.Fence.Key); err != nil {
			return err
		}
	}
	if err := checkReads(t, maxK); err != nil {
		return err
	}
	// The record either branch would log must fit in the log's maximum
	// record size, counted as take encodes it: a record the log refuses
	// would fail-stop the store for every caller. Which branch runs is
	// known only in the committer, so both must fit; a branch without
	// operations logs nothing.
	for _, ops := range [][]Op{t.Then, t.Else} {
		if len(ops) == 0 {
			continue
		}
		rec := record.Record{Txn: !r.single, Ops: ops}
		if !r.single {
			rec.Compares = t.If
		}
		if n := record.Size(&rec); n > s.maxRecord {
			return fmt.Errorf("%w: transaction of %d bytes logged, limit %d", ErrTooLarge, n, s.maxRecord)
		}
	}
	return nil
}
