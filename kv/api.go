package kv

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/wal"
)

// Put sets key to value and returns the revision it committed at. Under
// Always it returns once the write is durable.
func (s *Store) Put(key, value []byte) (Revision, error) {
	r := newRequest()
	r.single = true
	r.one[0] = PutOp(key, value)
	r.txn.Then = r.one[:]
	err := s.write(r)
	rev := r.res.Revision
	r.release()
	return rev, err
}

// Delete removes key and returns the revision it committed at, or
// ErrNotFound, committing nothing, when the key does not exist.
func (s *Store) Delete(key []byte) (Revision, error) {
	r := newRequest()
	r.single, r.mustExist = true, true
	r.one[0] = DeleteOp(key)
	r.txn.Then = r.one[:]
	err := s.write(r)
	rev := r.res.Revision
	r.release()
	return rev, err
}

// Add adds delta to key's value, a decimal int64 (a missing key counts as
// 0), and returns the new value and the revision. It fails with
// ErrNotInteger or ErrOverflow, committing nothing. The log records the
// delta, not the result.
func (s *Store) Add(key []byte, delta int64) (int64, Revision, error) {
	r := newRequest()
	r.single = true
	r.one[0] = AddOp(key, delta)
	r.txn.Then = r.one[:]
	err := s.write(r)
	added, rev := r.added, r.res.Revision
	r.release()
	return added, rev, err
}

// Txn commits a transaction atomically as one record (see Txn). A failed
// compare is not an error: TxnResult.Succeeded is false and the Else
// operations ran. A failed fence is ErrFenced. A transaction whose record,
// for either branch, would be over the log's maximum record size is
// ErrTooLarge, before anything is queued.
func (s *Store) Txn(t Txn) (TxnResult, error) {
	if s.closed.Load() {
		return TxnResult{}, ErrClosed
	}
	if t.empty() {
		return TxnResult{}, fmt.Errorf("%w: empty transaction", ErrInvalid)
	}
	r := newRequest()
	r.txn = t
	err := s.write(r)
	res := r.res
	r.release()
	return res, err
}

// Fenced returns a writer whose writes commit only while fence holds; see
// Fence.
func (s *Store) Fenced(f Fence) *FencedWriter { return &FencedWriter{s: s, f: f} }

// FencedWriter writes under a fencing token. Every write fails with
// ErrFenced, and writes nothing, once the fence key's revision is no
// longer the token.
type FencedWriter struct {
	s *Store
	f Fence
}

func (fw *FencedWriter) one(op Op, mustExist bool) *request {
	f := fw.f
	return &request{single: true, mustExist: mustExist, txn: Txn{Then: []Op{op}, Fence: &f}}
}

// Put is Store.Put under the fence.
func (fw *FencedWriter) Put(key, value []byte) (Revision, error) {
	r := fw.one(PutOp(key, value), false)
	err := fw.s.write(r)
	return r.res.Revision, err
}

// Delete is Store.Delete under the fence.
func (fw *FencedWriter) Delete(key []byte) (Revision, error) {
	r := fw.one(DeleteOp(key), true)
	err := fw.s.write(r)
	return r.res.Revision, err
}

// Add is Store.Add under the fence.
func (fw *FencedWriter) Add(key []byte, delta int64) (int64, Revision, error) {
	r := fw.one(AddOp(key, delta), false)
	err := fw.s.write(r)
	return r.added, r.res.Revision, err
}

// Txn is Store.Txn under the fence; the fence is checked before the
// compares.
func (fw *FencedWriter) Txn(t Txn) (TxnResult, error) {
	f := fw.f
	t.Fence = &f
	return fw.s.Txn(t)
}

// control runs f in the committer, between groups, and waits for it.
func (s *Store) control(f func() error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	s.closeMu.RLock()
	if s.closed.Load() {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	errc := make(chan error, 1)
	s.c.ensureStarted()
	s.c.ctl <- func() { errc <- f() }
	s.closeMu.RUnlock()
	return <-errc
}

// Sync makes every acknowledged write durable (under Always it has nothing
// to sync; under Interval and Never it is the way to wait for durability),
// and marks the log so that a read-only open in another process sees
// every write acknowledged so far. The store marks it by itself once it
// has been idle for a millisecond.
func (s *Store) Sync() error {
	return s.control(func() error { return s.c.syncAndMark() })
}

// Checkpoint writes a snapshot of the current state and deletes the log
// segments it covers, and returns when the snapshot is durable. Writers
// wait only while the log rotates; the snapshot is written from a
// copy-on-write view. If a checkpoint is already running, Checkpoint waits
// for it and then starts a new one.
func (s *Store) Checkpoint() error {
	for {
		wait := make(chan error, 1)
		var started bool
		err := s.control(func() (err error) {
			started, err = s.c.requestCheckpoint(wait)
			return err
		})
		if err != nil {
			return err
		}
		if err := <-wait; err != nil || started {
			return err
		}
	}
}

// Stats are counters of a Store since it was opened.
type Stats struct {
	Records       int64          // records committed
	Groups        int64          // group commits (one write each)
	Syncs         int64          // fdatasyncs of the log for commits
	AvgGroupSize  float64        // Records / Groups
	BytesLogged   int64          // bytes appended to the log
	Checkpoints   int64          // snapshots written since open
	CheckpointErr int64          // checkpoints that failed (the log is kept)
	Keys          int            // keys in the map
	Revision      Revision       // last committed revision
	Segment       wal.SegmentNum // segment being appended to
	// Recovery at open.
	RecoveryTime     time.Duration
	RecoveryReplayed int   // records replayed
	RecoveryBytes    int64 // log bytes replayed
	RecoverySnapshot bool  // a snapshot was loaded
	RecoveryTorn     bool  // a torn tail was cut
	// RecoveryUnvouched counts the records a read-only open left out: the
	// newest segment's last records, which no later record claims
	// durable yet (see Options.ReadOnly).
	RecoveryUnvouched int
	// RecoveryUnvouchedWhy says why, when no writer was live: the
	// fdatasync that failed, or the bytes that did not read back the
	// same past the page cache. Empty when a writer was live: its last
	// records show once it marks them durable.
	RecoveryUnvouchedWhy string
	// RecoveryVouched counts the records a read-only open, finding no
	// live writer, made durable itself (a dead writer's last records,
	// which no later record claimed synced) and shows.
	RecoveryVouched int
	// RecoveryWriter is, for a read-only open that found records no
	// writer claimed synced, the pid of the live writer whose hold on the
	// directory kept it from vouching for them (-1 when the pid cannot be
	// told): they are that writer's last group, which it marks durable a
	// moment later. 0 otherwise.
	RecoveryWriter int
	Failed         error // the fail-stop cause, if any

	// Durability. SyncLatency is the time of each fdatasync of the log
	// that succeeded (a group's, an interval's tick, a Sync), in
	// seconds; GroupSizes the records of each group commit.
	SyncLatency Histogram
	GroupSizes  Histogram
	// Checkpoints that succeeded: their durations in seconds, the bytes
	// of the snapshots they wrote, and the newest one's size.
	CheckpointTime      Histogram
	CheckpointBytes     int64
	LastCheckpointBytes int64

	// Watch. Watchers are the watches running on this store; WatchLag
	// how many durable revisions the slowest of them has yet to read
	// past (0 when every one is caught up); WatchFellBehind the watches
	// ended by ErrCompacted since open. The history holds HistoryBytes
	// (of Options.WatchHistoryBytes) and serves watches from
	// HistoryOldest.
	Watchers        int
	WatchLag        Revision
	WatchFellBehind int64
	HistoryBytes    int64
	HistoryOldest   Revision

	// Leases: live leases, the keys bound to them, and the expiries the
	// store committed since open (one per lease that reached its
	// deadline).
	Leases        int
	LeaseKeys     int
	LeaseExpiries int64
}

type statCounters struct {
	records, groups, syncs, bytes atomic.Int64
	checkpoints, checkpointErrors atomic.Int64
	leaseExpiries                 atomic.Int64
}

// Stats returns the store's counters; after Close, the zero Stats (Err
// then returns ErrClosed).
func (s *Store) Stats() Stats {
	if s.closed.Load() {
		return Stats{}
	}
	st := Stats{
		Records:              s.stats.records.Load(),
		Groups:               s.stats.groups.Load(),
		Syncs:                s.stats.syncs.Load(),
		BytesLogged:          s.stats.bytes.Load(),
		Checkpoints:          s.stats.checkpoints.Load(),
		CheckpointErr:        s.stats.checkpointErrors.Load(),
		RecoveryTime:         s.recovery.Duration,
		RecoveryReplayed:     s.recovery.Replayed,
		RecoveryBytes:        s.recovery.ReplayedBytes,
		RecoverySnapshot:     s.recovery.HadSnapshot,
		RecoveryTorn:         s.recovery.Torn,
		RecoveryUnvouched:    s.recovery.Unvouched,
		RecoveryUnvouchedWhy: s.recovery.UnvouchedWhy,
		RecoveryVouched:      s.recovery.Vouched,
		RecoveryWriter:       s.writerLive,
	}
	if st.Groups > 0 {
		st.AvgGroupSize = float64(st.Records) / float64(st.Groups)
	}
	st.SyncLatency = s.metrics.syncLatency.snapshot()
	st.GroupSizes = s.metrics.groupSize.snapshot()
	st.CheckpointTime = s.metrics.checkpointTime.snapshot()
	st.CheckpointBytes = s.metrics.checkpointBytes.Load()
	st.LastCheckpointBytes = s.metrics.lastCheckpoint.Load()
	ws := s.hist.stats()
	st.Watchers, st.WatchLag, st.WatchFellBehind = ws.watchers, ws.lag, ws.fellBehind
	st.HistoryBytes, st.HistoryOldest = ws.bytes, ws.oldest
	st.LeaseExpiries = s.stats.leaseExpiries.Load()
	s.mu.RLock()
	st.Keys, st.Revision = s.m.Len(), s.m.Revision()
	if s.leases != nil {
		st.Leases, st.LeaseKeys = s.leases.Len(), s.leases.Bound()
	}
	s.mu.RUnlock()
	if s.c != nil {
		st.Segment = s.c.w.Segment()
	}
	if f := s.failed.Load(); f != nil {
		st.Failed = *f
	}
	return st
}

// Pending is a write submitted with Submit.
type Pending struct {
	r   *request
	err error
}

// Submit queues op (a put, delete or add) and returns without waiting.
// Writes submitted one after another by one goroutine commit in that
// order, sharing group commits; Wait returns each one's outcome. A delete
// of a missing key is not an error here: it commits a record that changes
// nothing, so that every submitted write has its own revision.
func (s *Store) Submit(op Op) *Pending {
	r := &request{single: true, txn: Txn{Then: []Op{op}}}
	return &Pending{r: r, err: s.enqueue(r)}
}

// SubmitTxn queues a transaction, as Txn commits it, and returns without
// waiting; it keeps its place in the order of the writes that the calling
// goroutine submits (see Submit). Wait returns its revision; Result, after
// Wait, which branch it took and whether it committed a record.
func (s *Store) SubmitTxn(t Txn) *Pending {
	if t.empty() {
		return &Pending{err: fmt.Errorf("%w: empty transaction", ErrInvalid)}
	}
	r := &request{txn: t}
	return &Pending{r: r, err: s.enqueue(r)}
}

// Wait blocks until the write is committed (durable under Always) or has
// failed, and returns its revision and, for an add, the new value.
func (p *Pending) Wait() (Revision, int64, error) {
	if p.err != nil {
		return 0, 0, p.err
	}
	<-p.r.done
	return p.r.res.Revision, p.r.added, p.r.err
}

// Result returns the outcome of a transaction submitted with SubmitTxn,
// once Wait has returned (the zero result before, or after an error).
func (p *Pending) Result() TxnResult {
	if p.err != nil || p.r == nil {
		return TxnResult{}
	}
	select {
	case <-p.r.done:
		return p.r.res
	default:
		return TxnResult{}
	}
}
