package kv

import (
	"fmt"
	"time"

	"github.com/kvstore/kv/record"
)

// Leases in the committer. The committer keeps a lease table of its own
// (committer.evalLeases), ahead of the visible one (shared.leases) by the
// group being formed, as the overlay is ahead of the map: requests are
// evaluated against it, and each record that touches leases is applied
// to it when evaluated and to the visible table with the group's other
// changes (applyLeases). Its rules:
//
//   - Expiry comes first. Before it evaluates a request, the committer
//     ends every lease whose deadline the clock has reached, each with an
//     expire record of its own (expireDue), so that no request evaluated
//     at or after a deadline sees that lease or its keys. A timer on the
//     earliest deadline (armExpiry) does the same for a store with no
//     writes.
//   - A grant's lease id is its revision; its deadline is the clock plus
//     its TTL. A keep-alive's deadline is the later of the lease's and
//     the clock plus the TTL.
//   - A revoke or an expire stages the deletes of the keys bound to the
//     lease, in key order, as one record: watchers see each delete at its
//     revision.
//   - A put on a lease that is not live fails its whole request, staging
//     nothing.

// takeLease evaluates a lease request: a grant, a keep-alive, a revoke,
// or an expire the committer made (expireDue).
func (c *committer) takeLease(r *request) {
	g := &c.g
	lr := r.lease
	if g.rev >= record.MaxRevision {
		r.err = fmt.Errorf("%w (revision %d)", ErrRevisionsExhausted, g.rev)
		return
	}
	next := g.rev + 1
	now := c.clock.Now().UnixNano()
	rec := record.Record{Revision: next, Lease: record.LeaseChange{Action: lr.action, ID: lr.id}}
	switch lr.action {
	case record.LeaseGrant:
		rec.Lease.ID = LeaseID(next)
		rec.Lease.TTL = int64(lr.ttl)
		rec.Lease.Deadline = now + int64(lr.ttl)
		lr.info = LeaseInfo{ID: rec.Lease.ID, TTL: lr.ttl, Deadline: time.Unix(0, rec.Lease.Deadline)}
	case record.LeaseKeepAlive:
		ttl, deadline, ok := c.evalLeases.Info(lr.id)
		if !ok {
			r.err = c.leaseNotFound(lr.id)
			return
		}
		rec.Lease.Deadline = max(deadline, now+ttl)
		lr.info = LeaseInfo{ID: lr.id, TTL: time.Duration(ttl), Deadline: time.Unix(0, rec.Lease.Deadline)}
	case record.LeaseRevoke, record.LeaseExpire:
		le, ok := c.evalLeases.Get(lr.id)
		if !ok {
			r.err = c.leaseNotFound(lr.id)
			return
		}
		prevs := make([]*record.Entry, len(le.Keys))
		for i, k := range le.Keys {
			if prevs[i] = c.lookup(k); c.readErr != nil {
				// The image cannot say what the key holds: the map
				// could not apply the delete, so nothing is logged.
				r.err = c.readErr
				return
			}
		}
		rec.Ops = make([]Op, len(le.Keys))
		for i, k := range le.Keys {
			rec.Ops[i] = DeleteOp(k)
			ch := staged{key: c.scratch.key(k), ov: c.tombstone(), prev: prevs[i], rev: next}
			g.changes = append(g.changes, ch)
			c.overlay[ch.key] = ch.ov
		}
	}
	g.rev = next
	r.res.Revision, r.res.Committed, r.res.Succeeded = next, true, true
	g.offsets = append(g.offsets, len(c.buf))
	c.buf = record.Append(c.buf, &rec)
	c.noteLeases(&rec)
}

// checkOpLeases fails a request whose branch taken puts a key on a lease
// that is not live, before anything is staged.
func (c *committer) checkOpLeases(ops []Op) error {
	for i := range ops {
		if id := ops[i].Lease; id != 0 {
			if _, _, ok := c.evalLeases.Info(id); !ok {
				return c.leaseNotFound(id)
			}
		}
	}
	return nil
}

// noteLeases applies a record just logged to the committer's lease table
// and keeps it for the visible one, when it touches leases.
func (c *committer) noteLeases(rec *record.Record) {
	if !c.evalLeases.Touches(rec) {
		return
	}
	if err := c.evalLeases.Apply(rec); err != nil {
		// Evaluation checked what Apply checks: a failure here is a bug,
		// and the record is in the group's buffer already.
		panic(fmt.Sprintf("kv: committer: a record evaluated against the lease table breaks its rules: %v", err))
	}
	c.g.leaseRecs = append(c.g.leaseRecs, *rec)
}

// applyLeases makes the group's lease changes visible; called under mu
// with the group's other changes.
func (c *committer) applyLeases() {
	for i := range c.g.leaseRecs {
		if err := c.shared.leases.Apply(&c.g.leaseRecs[i]); err != nil {
			panic(fmt.Sprintf("kv: committer: the visible lease table refuses a record its own took: %v", err))
		}
	}
}

// expireDue takes an expire request into the group for every lease whose
// deadline the clock has reached, in the order they end.
func (c *committer) expireDue() {
	_, d, ok := c.evalLeases.Next()
	if !ok {
		return
	}
	now := c.clock.Now().UnixNano()
	if d > now {
		return
	}
	for _, id := range c.evalLeases.Due(now) {
		_, deadline, _ := c.evalLeases.Info(id)
		c.rememberExpired(id, deadline)
		c.stats.leaseExpiries.Add(1)
		c.take(&request{lease: &leaseReq{action: record.LeaseExpire, id: id}, internal: true, done: make(chan struct{})})
	}
}

// armExpiry sets the timer on the earliest deadline, unless it is set on
// it already, or the store can commit nothing more.
func (c *committer) armExpiry() {
	_, d, ok := c.evalLeases.Next()
	if !ok || c.failed.Load() != nil || c.lastRev >= record.MaxRevision {
		c.expiry, c.expiryAt = nil, 0
		return
	}
	if c.expiry != nil && c.expiryAt == d {
		return
	}
	c.expiryAt = d
	c.expiry = c.clock.After(time.Duration(d - c.clock.Now().UnixNano()))
}

// expire commits the expiry of the leases whose deadline has passed, as a
// group of its own (the expiry timer fired).
func (c *committer) expire() {
	c.expiry = nil
	c.begin()
	c.expireDue()
	c.commit()
}
