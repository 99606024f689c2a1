package kv

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/wal"
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

// maxBatch bounds a group commit.
const maxBatch = 4096

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
// learns that it will not (see gather).
func (s *Store) leave() {
	s.writers.Add(-1)
	if s.gathering.Load() {
		select {
		case s.nudge <- struct{}{}:
		default:
		}
	}
}

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

// run is the committer: it takes the waiting writes as one group,
// evaluates them in order, logs them with one write and one sync, applies
// them to the visible map and acknowledges them. While it syncs, the next
// group gathers in the channel.
func (s *Store) run() {
	defer close(s.done)
	defer close(s.flush)
	var tick <-chan time.Time
	if s.opts.Sync.kind == syncInterval && s.opts.Sync.interval > 0 {
		t := time.NewTicker(s.opts.Sync.interval)
		defer t.Stop()
		tick = t.C
	}
	if s.ckptAtStart {
		s.startCheckpoint()
	}
	// idle fires once the committer has had nothing to do for markDelay
	// after a commit: then it marks the log (see mark).
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	for {
		select {
		case r := <-s.reqs:
			s.begin()
			s.take(r)
			s.gather()
			s.commit()
			idle.Reset(markDelay)
		case <-idle.C:
			if s.failed.Load() == nil {
				s.mark()
			}
		case f := <-s.ctl:
			f()
		case err := <-s.ckpt:
			s.checkpointDone(err)
		case <-tick:
			if s.failed.Load() == nil {
				if err := s.w.Sync(); err != nil {
					s.failStop(err)
				} else {
					s.mark()
				}
			}
		case <-s.quit:
			// Writes accepted before Close are committed, not dropped,
			// in groups as the running store forms them: every writer
			// is queued by now (Close waited for those inside enqueue),
			// so there is no one to wait for, and one sync a write
			// would make Close take hundreds of syncs where one does.
			for {
				select {
				case r := <-s.reqs:
					s.begin()
					s.take(r)
					s.drain()
					s.commit()
					continue
				default:
				}
				break
			}
			if s.ckpt != nil {
				s.checkpointDone(<-s.ckpt)
			}
			return
		}
	}
}

// gather takes the waiting requests into the group. When more writers
// are inside write than the group holds, the others are usually on their
// way: writers acknowledged by the last group, woken but not yet back.
// Rather than sync without them and make them wait a whole sync for the
// next group, wait for them, until each writer is either in the group or
// gone (leave nudges the wait), or at most a short gap passes without one,
// and all of it at most a fraction of a sync. A lone writer never waits.
// Requests are evaluated as they come, so that the wait for the last of
// them hides the evaluation of the others.
func (s *Store) gather() {
	g := &s.g
	s.drain()
	if len(g.reqs) >= int(s.writers.Load()) || len(g.reqs) >= maxBatch {
		return
	}
	gap := min(s.lastSync/8, 50*time.Microsecond)
	if gap <= 0 {
		return
	}
	// gathering is set before writers is read again, and leave changes
	// writers before it reads gathering: a writer that leaves now is
	// either counted out below or nudges.
	s.gathering.Store(true)
	defer s.gathering.Store(false)
	select {
	case <-s.nudge: // stale
	default:
	}
	deadline := time.Now().Add(min(s.lastSync/2, 300*time.Microsecond))
	timer := time.NewTimer(gap)
	defer timer.Stop()
	for len(g.reqs) < maxBatch && len(g.reqs) < int(s.writers.Load()) {
		select {
		case r := <-s.reqs:
			s.take(r)
			s.drain()
			left := time.Until(deadline)
			if left <= 0 {
				return
			}
			timer.Reset(min(gap, left))
		case <-s.nudge:
		case <-timer.C:
			return
		}
	}
}

// drain takes the requests waiting in the queue into the group, up to
// maxBatch, without waiting for more.
func (s *Store) drain() {
	for len(s.g.reqs) < maxBatch {
		select {
		case r := <-s.reqs:
			s.take(r)
			continue
		default:
		}
		return
	}
}

// staged is one key's new state in a group being committed.
type staged struct {
	key string
	e   *record.Entry // nil: deleted
	// ov is what the overlay holds for this change: e, or for a delete a
	// tombstone of its own, so that a change can tell whether the overlay
	// still holds it or a later change of the same key.
	ov *record.Entry
}

// scratch holds a group's staged entries and their bytes, reused from
// one group to the next: by the time the next group is evaluated, apply
// has copied every change of this one into the map.
type scratch struct {
	bytes  []byte
	blocks [][]record.Entry // filled in order; never moved, so pointers hold
	n      int              // entries handed out
}

const scratchBlock = 256

// entry returns a zeroed entry that stays valid until reset.
func (sc *scratch) entry() *record.Entry {
	b, i := sc.n/scratchBlock, sc.n%scratchBlock
	if b == len(sc.blocks) {
		sc.blocks = append(sc.blocks, make([]record.Entry, scratchBlock))
	}
	sc.n++
	return &sc.blocks[b][i]
}

// reset takes back everything handed out; a big group's space is let go.
func (sc *scratch) reset() {
	for _, b := range sc.blocks[:min(len(sc.blocks), (sc.n+scratchBlock-1)/scratchBlock)] {
		clear(b) // let go of what the entries point to
	}
	sc.n = 0
	sc.bytes = sc.bytes[:0]
	if cap(sc.bytes) > 4<<20 || len(sc.blocks) > 64 {
		*sc = scratch{}
	}
}

// key returns key as a string that stays valid until reset.
func (sc *scratch) key(key []byte) string {
	l := len(sc.bytes)
	sc.bytes = append(sc.bytes, key...)
	return unsafe.String(unsafe.SliceData(sc.bytes[l:]), len(key))
}

// tombstone marks a key deleted in the overlay. Each delete gets its own
// (Key is nil; real entries always have a key).
func (s *Store) tombstone() *record.Entry { return s.scratch.entry() }

// lookup returns the entry of key as the group being evaluated sees it:
// the overlay's, else the map's (copied into the scratch space), or nil.
func (s *Store) lookup(key []byte) *record.Entry {
	if e, ok := s.overlay[string(key)]; ok {
		if e.Key == nil {
			return nil // deleted by a change still waiting for its sync
		}
		return e
	}
	// The committer is the map's only writer.
	if e, ok := s.m.Lookup(key); ok {
		d := s.scratch.entry()
		*d = e
		return d
	}
	return nil
}

// begin starts a group.
func (s *Store) begin() {
	g := &s.g
	clear(g.reqs)
	clear(g.changes)
	*g = group{reqs: g.reqs[:0], changes: g.changes[:0], offsets: g.offsets[:0], rev: s.lastRev}
	if s.failed.Load() != nil {
		// Only the committer fails the store, so it stays failed until
		// commit answers the group.
		g.failed = true
		return
	}
	clear(s.overlay) // every earlier group is visible by now
	s.scratch.reset()
	s.buf = s.buf[:0]
}

// take adds r to the group and evaluates it: its fence, its compares, the
// entries it makes, and its record.
func (s *Store) take(r *request) {
	g := &s.g
	g.reqs = append(g.reqs, r)
	if g.failed {
		return
	}
	// The keys' index slots are far apart in a big map: ask for them all
	// before the first is needed, so that their cache misses overlap.
	t := &r.txn
	if t.Fence != nil {
		s.m.Prefetch(t.Fence.Key)
	}
	for i := range t.If {
		s.m.Prefetch(t.If[i].Key)
	}
	for i := range min(len(t.Then), 8) {
		s.m.Prefetch(t.Then[i].Key)
	}
	if f := t.Fence; f != nil {
		e := s.lookup(f.Key)
		switch {
		case e == nil:
			r.err = fmt.Errorf("%w: fence key %q does not exist (token %d)", ErrFenced, f.Key, f.Token)
			return
		case f.By == FenceModRev && e.ModRev != f.Token:
			r.err = fmt.Errorf("%w: fence key %q changed at revision %d, token %d", ErrFenced, f.Key, e.ModRev, f.Token)
			return
		case f.By == FenceCreateRev && e.CreateRev != f.Token:
			r.err = fmt.Errorf("%w: fence key %q created at revision %d, token %d", ErrFenced, f.Key, e.CreateRev, f.Token)
			return
		}
	}
	ok := true
	for i := range t.If {
		if !holds(&t.If[i], s.lookup(t.If[i].Key)) {
			ok = false
			break
		}
	}
	ops := t.Then
	if !ok {
		ops = t.Else
	}
	r.res.Succeeded = ok
	if r.mustExist && s.lookup(ops[0].Key) == nil {
		r.err = ErrNotFound
		return
	}
	if len(ops) == 0 {
		r.res.Revision = g.rev
		return
	}
	if g.rev >= record.MaxRevision {
		// The next revision would not fit in the int64 that compares
		// use, and a recovery would refuse the record: commit nothing.
		r.err = fmt.Errorf("%w (revision %d)", ErrRevisionsExhausted, g.rev)
		return
	}
	// Compute the new entries; a failing op fails the whole
	// transaction and stages nothing.
	next := g.rev + 1
	mark := len(g.changes)
	var err error
	var mine map[string]*record.Entry // a big transaction's own changes
	if len(ops) > 8 {
		if s.mine == nil {
			s.mine = make(map[string]*record.Entry, len(ops))
		}
		mine = s.mine
		clear(mine)
	}
	for i := range ops {
		var old *record.Entry
		if mine != nil {
			var ok bool
			if old, ok = mine[string(ops[i].Key)]; !ok {
				old = s.lookup(ops[i].Key)
			}
		} else {
			old = s.lookupStaged(ops[i].Key, g.changes[mark:])
		}
		e := s.scratch.entry()
		var deleted bool
		deleted, s.scratch.bytes, err = record.NextInto(e, s.scratch.bytes, old, &ops[i], next)
		if err != nil {
			err = mapApplyError(err, &ops[i], old)
			break
		}
		c := staged{e: e, ov: e}
		if deleted {
			c.key, c.e, c.ov = s.scratch.key(ops[i].Key), nil, s.tombstone()
		} else {
			c.key = unsafe.String(unsafe.SliceData(e.Key), len(e.Key))
		}
		g.changes = append(g.changes, c)
		if mine != nil {
			mine[c.key] = c.e
		}
	}
	if err != nil {
		g.changes = g.changes[:mark]
		r.err = err
		return
	}
	for _, c := range g.changes[mark:] {
		s.overlay[c.key] = c.ov
	}
	if r.single && ops[0].Kind == record.KindAdd {
		r.added, _ = record.ParseInt(g.changes[len(g.changes)-1].e.Value)
	}
	g.rev = next
	r.res.Revision, r.res.Committed = g.rev, true
	rec := record.Record{Revision: g.rev, Txn: !r.single, Succeeded: ok, Ops: ops}
	if !r.single {
		rec.Compares = t.If
	}
	g.offsets = append(g.offsets, len(s.buf))
	s.buf = record.Append(s.buf, &rec)
}

// commit logs, syncs and applies the group, and answers its requests.
func (s *Store) commit() {
	g := &s.g
	if f := s.failed.Load(); f != nil {
		for _, r := range g.reqs {
			r.err = fmt.Errorf("%w: %w", ErrFailed, *f)
			r.finish()
		}
		return
	}
	var payloads [][]byte
	offsets := g.offsets
	if len(offsets) == 0 {
		s.ack(g) // nothing to log; everything before is visible already
		return
	}
	offsets = append(offsets, len(s.buf))
	for i := 0; i+1 < len(offsets); i++ {
		payloads = append(payloads, s.buf[offsets[i]:offsets[i+1]])
	}
	if err := s.appendLog(payloads); err != nil {
		s.failStop(err)
		s.fail(g, err)
		return
	}
	s.lastRev = g.rev
	switch {
	case variant.Of(s.fs) == variant.AckBeforeSync:
		// The bug: acknowledge, and show, before the sync.
		s.apply(g.changes, g.rev)
		s.ack(g)
		s.kickFlush()
		if err := s.w.Sync(); err != nil {
			s.failStop(err)
		}
	case s.opts.Sync.kind == syncAlways:
		// The sync runs in the committer: the next group gathers in the
		// channel meanwhile, and a lone writer pays no hand-off on top of
		// its fdatasync. The flusher puts the earlier groups' changes in
		// the ordered tree during the sync, while the writers wait and the
		// processors are idle; left for a checkpoint's clone, a log's
		// worth of puts held every reader and writer (bench/RESULTS.md).
		if len(g.changes) <= flushWakeMax {
			s.kickFlush()
		}
		start := time.Now()
		err := s.w.Sync()
		s.lastSync = time.Since(start)
		if err != nil {
			// Nothing that depended on the failed sync is acknowledged,
			// even if a later sync would succeed: the kernel may have
			// dropped it.
			s.failStop(err)
			s.fail(g, err)
			return
		}
		s.stats.syncs.Add(1)
		// Durable: make it visible, then acknowledge.
		s.apply(g.changes, g.rev)
		s.ack(g)
	default:
		// Never, Interval, or the no-sync bug: visible and acknowledged
		// once written.
		s.apply(g.changes, g.rev)
		s.ack(g)
		s.kickFlush()
	}
	s.maybeCheckpoint()
}

// group is one group commit: its requests, the changes they made, and the
// revision after them. The committer forms one at a time, in Store.g.
type group struct {
	reqs    []*request
	changes []staged
	rev     Revision
	offsets []int // where each logged request's record starts in Store.buf
	failed  bool  // the store had failed when the group began
}

// ack answers every request of g.
func (s *Store) ack(g *group) {
	for _, r := range g.reqs {
		r.finish()
	}
}

// fail answers every request of g with ErrFailed wrapping err, and a zero
// result. An error a request already had is dropped too: take computed
// ErrFenced, ErrNotFound, ErrNotInteger or ErrOverflow against the
// group's earlier requests, whose records were in the failed append or
// sync and whose outcome is therefore unknown, so such an error may
// describe a state that never becomes durable (a fence key the group
// created, a key it deleted).
func (s *Store) fail(g *group, err error) {
	for _, r := range g.reqs {
		r.err = fmt.Errorf("%w: %w", ErrFailed, err)
		r.res, r.added = TxnResult{}, 0
		r.finish()
	}
}

// kickFlush wakes the flusher unless it is awake already.
func (s *Store) kickFlush() {
	select {
	case s.flush <- struct{}{}:
	default:
	}
}

// flusher inserts the changes apply made into the ordered tree, off the
// commit path: apply changes only the hash index, which is all that Get
// and the committer read, and the insertion into the tree (a descent with
// a cache miss or two per level) happens while the next group syncs.
// Scan and checkpoints take a clone, which flushes what is left.
//
// It takes the changes in parts, letting go of the lock between them, so
// that a backlog (big transactions do not wake it) holds up Get and the
// committer for a part at a time.
func (s *Store) flusher() {
	for range s.flush {
		for left := 1; left > 0; {
			s.mu.Lock()
			left = s.m.FlushSome(flushPart)
			s.mu.Unlock()
		}
	}
}

// flushPart is how many changes the flusher takes in under one hold of
// the lock: a short hold, so that readers and writers waiting for the
// lock are let in between parts.
const flushPart = 1024

// flushWakeMax is the largest group after which the committer wakes the
// flusher. Changes that came in smaller groups go into the tree at a cost
// hidden by the sync; those of a bulk load (1,000-put transactions) cost
// it more one part at a time than in one pass at the next checkpoint
// (bench/RESULTS.md has the figures), so they wait for it, or for the
// next small group.
const flushWakeMax = 256

// apply makes a group's changes visible to readers.
func (s *Store) apply(changes []staged, rev Revision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyLocked(changes, rev)
}

func (s *Store) applyLocked(changes []staged, rev Revision) {
	for _, c := range changes {
		if c.e == nil {
			s.m.DeleteLater([]byte(c.key))
			continue
		}
		s.m.LoadLater(c.e)
	}
	s.m.SetRevision(rev)
}

// maybeCheckpoint starts a background checkpoint when enough log has
// accumulated since the last one.
func (s *Store) maybeCheckpoint() {
	if cb := s.opts.checkpointBytes(); cb > 0 && s.sinceSnap >= cb && s.ckpt == nil {
		s.startCheckpoint()
	}
	if cap(s.buf) > 4<<20 {
		s.buf = nil
	}
}

// lookupStaged sees the changes of a small transaction being evaluated, then
// the group's overlay, then the visible map.
func (s *Store) lookupStaged(key []byte, mine []staged) *record.Entry {
	for i := len(mine) - 1; i >= 0; i-- {
		if mine[i].key == string(key) {
			return mine[i].e
		}
	}
	return s.lookup(key)
}

// mapApplyError turns the record package's error for op, whose key held
// old, into the store's sentinel.
func mapApplyError(err error, op *Op, old *record.Entry) error {
	switch {
	case errors.Is(err, record.ErrNotInteger):
		return fmt.Errorf("%w: key %q holds %q", ErrNotInteger, op.Key, old.Value)
	case errors.Is(err, record.ErrOverflow):
		return fmt.Errorf("%w: key %q holds %s, adding %d", ErrOverflow, op.Key, old.Value, op.Delta)
	}
	return err
}

// appendLog writes a group's records with one write.
func (s *Store) appendLog(payloads [][]byte) error {
	if _, err := s.w.Append(payloads...); err != nil {
		return err
	}
	n := int64(0)
	for _, p := range payloads {
		n += int64(len(p) + wal.HeaderSize)
	}
	s.sinceSnap += n
	s.stats.bytes.Add(n)
	s.stats.records.Add(int64(len(payloads)))
	s.stats.groups.Add(1)
	return nil
}

// mark tells readers in other processes how far the log is durable (a
// mark record, not synced: see wal.Writer.Mark), once the committer has
// had nothing to do for markDelay. A read-only open shows only the
// records a later record claims durable: without marks, a reader beside
// an idle writer would never see the writer's last group. A busy writer
// needs none: each group's records claim the sync before them.
func (s *Store) mark() {
	if err := s.w.Mark(); err != nil {
		s.failStop(err)
	}
}

// markDelay is how long the committer waits, idle, before it marks the
// log: long enough that a writer that commits one write after another
// adds no mark between them, short enough that a reader in another
// process sees a write soon after the writer went idle.
const markDelay = time.Millisecond

// failStop records the first write or sync failure; from then on every
// write returns ErrFailed.
func (s *Store) failStop(err error) {
	if s.failed.CompareAndSwap(nil, &err) {
		s.log.Error("log write failed; refusing writes until reopened", "dir", s.dir, "err", err)
	}
}

// startCheckpoint rotates the log, takes a copy-on-write clone of the map
// and writes the snapshot in the background. Writers wait only for the
// rotation.
func (s *Store) startCheckpoint() {
	if s.failed.Load() != nil {
		return
	}
	sealed, err := s.w.Rotate()
	if err != nil {
		s.failStop(err)
		return
	}
	s.mu.Lock()
	view := s.m.Clone()
	s.mu.Unlock()
	s.sinceSnap = 0
	prev := s.covered
	done := make(chan error, 1)
	s.ckpt = done
	go func() {
		start := time.Now()
		// The snapshot first, durable, then the covered segments: the
		// protocol recovery's checkpoint follows too.
		meta := snapshot.Meta{Covered: sealed, Revision: view.Revision(), Count: uint64(view.Len())}
		_, err := recovery.WriteCheckpoint(s.fs, s.dir, meta, view.All(nil, nil), prev+1)
		s.log.Info("checkpoint", "dir", s.dir, "covered", sealed.String(), "revision", uint64(view.Revision()),
			"keys", view.Len(), "duration", time.Since(start), "err", err)
		if err == nil {
			s.covered = sealed
		}
		done <- err
	}()
}

// checkpointDone runs in the committer when the background checkpoint
// ends.
func (s *Store) checkpointDone(err error) {
	s.ckpt = nil
	if err == nil {
		s.stats.checkpoints.Add(1)
	} else {
		s.stats.checkpointErrors.Add(1)
	}
	for _, c := range s.ckptWait {
		c <- err
	}
	s.ckptWait = nil
}
