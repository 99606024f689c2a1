package kv

import (
	"runtime"
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
// gone (it counts itself out of writers), or at most a short gap passes
// without one, and all of it at most a fraction of a sync. A lone writer
// never waits. Requests are evaluated as they come, so that the wait for
// the last of them hides the evaluation of the others.
//
// The wait polls the queue and yields the processor between polls
// (runtime.Gosched) instead of sleeping on it: a sleeping committer is
// woken by each arrival, a wake-up that costs the writer a hand-off to
// another thread; with 64 writers those wake-ups were a good part of the
// time from one sync to the next (BenchmarkPut64Floor models the
// hand-off alone; bench/RESULTS.md has the figures). A yield lets the
// writers that the last group woke run first, on this processor too, so
// the poll takes no time from them; what it costs is a processor kept
// busy for at most the wait, which is bounded as before.
func (c *committer) gather() {
	g := &c.g
	c.drain()
	gap := min(c.lastSync/8, c.gatherGap)
	if gap <= 0 {
		return
	}
	last := time.Now()
	deadline := last.Add(min(c.lastSync/2, c.gatherWait))
	for len(g.reqs) < maxBatch {
		until := last.Add(gap)
		if until.After(deadline) {
			until = deadline
		}
		r := c.poll(len(g.reqs), until)
		if r == nil {
			return
		}
		c.take(r)
		c.drain()
		last = time.Now()
	}
}

// poll returns the next request queued before until, polling the queue
// and yielding the processor between polls, or nil at until or as soon
// as no more than have writers are inside write (the others have left).
func (c *committer) poll(have int, until time.Time) *request {
	for int(c.writers.Load()) > have {
		select {
		case r := <-c.reqs:
			return r
		default:
		}
		if !time.Now().Before(until) {
			return nil
		}
		runtime.Gosched()
	}
	return nil
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

// awaitNext returns the first request of the next group when it comes
// soon: after a group is answered, its writers are on their way back,
// and polling for the first of them, as gather does for the others,
// spares the committer a sleep in run's select and the wake-up the
// writer would pay for. It gives up after gather's gap, or at once when
// no writer is inside write, and returns nil.
func (c *committer) awaitNext() *request {
	gap := min(c.lastSync/8, c.gatherGap)
	if gap <= 0 {
		return nil
	}
	return c.poll(0, time.Now().Add(gap))
}

// chainMax bounds the groups the committer forms one after another
// without going back to run's select (awaitNext), so that control
// functions, checkpoints' ends and Close wait for at most as many.
const chainMax = 8
