package kv

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"github.com/kvstore/kv/record"
)

// group is one group commit: its requests, the changes they made, and the
// revision after them. The committer forms one at a time, in committer.g.
type group struct {
	reqs    []*request
	changes []staged
	rev     Revision
	offsets []int // where each logged request's record starts in committer.buf
	failed  bool  // the store had failed when the group began
	// leaseRecs are the group's records that touch leases, for the
	// visible lease table (see lease_commit.go).
	leaseRecs []record.Record
}

// staged is one key's new state in a group being committed.
type staged struct {
	key string
	e   *record.Entry // nil: deleted
	// ov is what the overlay holds for this change: e, or for a delete a
	// tombstone of its own, so that a change can tell whether the overlay
	// still holds it or a later change of the same key.
	ov *record.Entry
	// prev is the key's state before this change (nil: absent), and rev
	// the change's revision, for the watch history.
	prev *record.Entry
	rev  Revision
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
func (c *committer) tombstone() *record.Entry { return c.scratch.entry() }

// lookup returns the entry of key as the group being evaluated sees it:
// the overlay's, else the map's (copied into the scratch space), or nil.
func (c *committer) lookup(key []byte) *record.Entry {
	if e, ok := c.overlay[string(key)]; ok {
		if e.Key == nil {
			return nil // deleted by a change still waiting for its sync
		}
		return e
	}
	// The committer is the map's only writer.
	e, ok, err := c.m.Lookup(key)
	if err != nil {
		// Damage in the image, or a read of it that failed: the request
		// being evaluated fails with it (see take).
		if c.readErr == nil {
			c.readErr = err
		}
		return nil
	}
	if ok {
		d := c.scratch.entry()
		*d = e
		return d
	}
	return nil
}

// lookupStaged sees the changes of a small transaction being evaluated, then
// the group's overlay, then the visible map.
func (c *committer) lookupStaged(key []byte, mine []staged) *record.Entry {
	for i := len(mine) - 1; i >= 0; i-- {
		if mine[i].key == string(key) {
			return mine[i].e
		}
	}
	return c.lookup(key)
}

// begin starts a group.
func (c *committer) begin() {
	g := &c.g
	clear(g.reqs)
	clear(g.changes)
	*g = group{reqs: g.reqs[:0], changes: g.changes[:0], offsets: g.offsets[:0], rev: c.lastRev}
	if c.failed.Load() != nil {
		// Only the committer fails the store, so it stays failed until
		// commit answers the group.
		g.failed = true
		return
	}
	clear(c.overlay) // every earlier group is visible by now
	c.scratch.reset()
	c.buf = c.buf[:0]
}

// take adds r to the group and evaluates it: its fence, its compares, the
// entries it makes, and its record.
func (c *committer) take(r *request) {
	g := &c.g
	if !g.failed && !r.internal {
		c.expireDue() // leases whose deadline passed end first
	}
	g.reqs = append(g.reqs, r)
	if g.failed {
		return
	}
	c.readErr = nil
	if r.lease != nil {
		c.takeLease(r)
		return
	}
	c.evaluate(r)
}

// evaluate evaluates r, a transaction, against the state the group's
// earlier requests leave: a read of the image that fails (c.readErr)
// fails r with that error, having staged and logged nothing of it.
func (c *committer) evaluate(r *request) {
	g := &c.g
	// The keys' index slots are far apart in a big map: ask for them all
	// before the first is needed, so that their cache misses overlap.
	t := &r.txn
	if t.Fence != nil {
		c.m.Prefetch(t.Fence.Key)
	}
	for i := range t.If {
		c.m.Prefetch(t.If[i].Key)
	}
	for i := range min(len(t.Then), 8) {
		c.m.Prefetch(t.Then[i].Key)
	}
	if f := t.Fence; f != nil {
		e := c.lookup(f.Key)
		switch {
		case c.readErr != nil:
			r.err = c.readErr
			return
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
		if !holds(&t.If[i], c.lookup(t.If[i].Key)) {
			ok = false
			break
		}
	}
	ops := t.Then
	if !ok {
		ops = t.Else
	}
	r.res.Succeeded = ok
	if reads := t.ThenRead; ok {
		r.res.Reads = c.reads(reads)
	} else {
		r.res.Reads = c.reads(t.ElseRead)
	}
	if c.readErr != nil {
		r.err, r.res = c.readErr, TxnResult{}
		return
	}
	if r.mustExist && c.lookup(ops[0].Key) == nil {
		r.err = &NotFoundError{Key: bytes.Clone(ops[0].Key)}
		if c.readErr != nil {
			r.err = c.readErr
		}
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
	if err := c.checkOpLeases(ops); err != nil {
		r.err = err
		return
	}
	// Compute the new entries; a failing op fails the whole
	// transaction and stages nothing.
	next := g.rev + 1
	mark := len(g.changes)
	var err error
	var mine map[string]*record.Entry // a big transaction's own changes
	if len(ops) > 8 {
		if c.mine == nil {
			c.mine = make(map[string]*record.Entry, len(ops))
		}
		mine = c.mine
		clear(mine)
	}
	for i := range ops {
		var old *record.Entry
		if mine != nil {
			var ok bool
			if old, ok = mine[string(ops[i].Key)]; !ok {
				old = c.lookup(ops[i].Key)
			}
		} else {
			old = c.lookupStaged(ops[i].Key, g.changes[mark:])
		}
		if c.readErr != nil {
			err = c.readErr
			break
		}
		e := c.scratch.entry()
		var deleted bool
		deleted, c.scratch.bytes, err = record.NextInto(e, c.scratch.bytes, old, &ops[i], next)
		if err != nil {
			err = mapApplyError(err, &ops[i], old)
			break
		}
		ch := staged{e: e, ov: e, prev: old, rev: next}
		if deleted {
			ch.key, ch.e, ch.ov = c.scratch.key(ops[i].Key), nil, c.tombstone()
		} else {
			ch.key = unsafe.String(unsafe.SliceData(e.Key), len(e.Key))
		}
		g.changes = append(g.changes, ch)
		if mine != nil {
			mine[ch.key] = ch.e
		}
	}
	if err != nil {
		g.changes = g.changes[:mark]
		r.err = err
		return
	}
	for _, ch := range g.changes[mark:] {
		c.overlay[ch.key] = ch.ov
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
	g.offsets = append(g.offsets, len(c.buf))
	c.buf = record.Append(c.buf, &rec)
	c.noteLeases(&rec)
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
