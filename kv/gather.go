package kv

import (
	"time"
)

// maxBatch bounds a group commit.
const maxBatch = 4096

// How long gather waits for writers on their way: at most gatherGap
// without one arriving, and gatherWait in all; each also at most a
// fraction of the last sync (an eighth and a half).
const (
	gatherGap  = 50 * time.Microsecond
	gatherWait = 300 * time.Microsecond
)

// gather takes the waiting requests into the group. When more writers
// are inside write than the group holds, the others are usually on their
// way: writers acknowledged by the last group, woken but not yet back.
// Rather than sync without them and make them wait a whole sync for the
// next group, wait for them, until each writer is either in the group or
// gone (leave nudges the wait), or at most a short gap passes without one,
// and all of it at most a fraction of a sync. A lone writer never waits.
// Requests are evaluated as they come, so that the wait for the last of
// them hides the evaluation of the others.
func (c *committer) gather() {
	g := &c.g
	c.drain()
	if len(g.reqs) >= int(c.writers.Load()) || len(g.reqs) >= maxBatch {
		return
	}
	gap := min(c.lastSync/8, c.gatherGap)
	if gap <= 0 {
		return
	}
	// gathering is set before writers is read again, and leave changes
	// writers before it reads gathering: a writer that leaves now is
	// either counted out below or nudges.
	c.gathering.Store(true)
	defer c.gathering.Store(false)
	select {
	case <-c.nudge: // stale
	default:
	}
	deadline := time.Now().Add(min(c.lastSync/2, c.gatherWait))
	timer := time.NewTimer(gap)
	defer timer.Stop()
	for len(g.reqs) < maxBatch && len(g.reqs) < int(c.writers.Load()) {
		select {
		case r := <-c.reqs:
			c.take(r)
			c.drain()
			left := time.Until(deadline)
			if left <= 0 {
				return
			}
			timer.Reset(min(gap, left))
		case <-c.nudge:
		case <-timer.C:
			return
		}
	}
}

// drain takes the requests waiting in the queue into the group, up to
// maxBatch, without waiting for more.
func (c *committer) drain() {
	for len(c.g.reqs) < maxBatch {
		select {
		case r := <-c.reqs:
			c.take(r)
			continue
		default:
		}
		return
	}
}
