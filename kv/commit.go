package kv

import (
	"fmt"
	"time"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/wal"
)

// commit logs, syncs and applies the group, and answers its requests.
func (c *committer) commit() {
	g := &c.g
	if f := c.failed.Load(); f != nil {
		for _, r := range g.reqs {
			r.err = fmt.Errorf("%w: %w", ErrFailed, *f)
			r.finish()
		}
		return
	}
	var payloads [][]byte
	offsets := g.offsets
	if len(offsets) == 0 {
		c.ack(g) // nothing to log; everything before is visible already
		return
	}
	offsets = append(offsets, len(c.buf))
	for i := 0; i+1 < len(offsets); i++ {
		payloads = append(payloads, c.buf[offsets[i]:offsets[i+1]])
	}
	if err := c.appendLog(payloads); err != nil {
		c.failStop(err)
		c.fail(g, err)
		return
	}
	c.lastRev = g.rev
	// The watch history takes the group's changes before they are
	// applied, while the entries before them are still the map's;
	// watchers see them once published. Under Always the flusher adds
	// them during the sync (histDuringSync); else the committer does now.
	during := c.histDuringSync(g)
	if !during {
		c.hist.add(g.changes)
	}
	switch {
	case variant.Of(c.fs) == variant.AckBeforeSync:
		// The bug: acknowledge, and show, before the sync.
		c.apply(g.changes, g.rev)
		c.ack(g)
		c.kickFlush()
		if err := c.w.Sync(); err != nil {
			c.failStop(err)
		} else {
			c.hist.publish(g.rev)
		}
	case c.opts.Sync.kind == syncAlways:
		// The sync runs in the committer: the next group gathers in the
		// channel meanwhile, and a lone writer pays no hand-off on top of
		// its fdatasync. The flusher puts the earlier groups' changes in
		// the ordered tree during the sync, while the writers wait and the
		// processors are idle; left for a checkpoint's clone, a log's
		// worth of puts held every reader and writer (bench/RESULTS.md).
		if during {
			c.histJob <- g.changes // wakes the flusher too
		} else if len(g.changes) <= flushWakeMax {
			c.kickFlush()
		}
		start := time.Now()
		err := c.w.Sync()
		c.lastSync = time.Since(start)
		if during {
			// The group's entries are the scratch's until the next
			// group begins, and the map's until apply: the history must
			// have them by then. A flusher still busy with a backlog has
			// not taken the job: the committer takes it back and adds
			// them itself, rather than wait for the backlog.
			select {
			case changes := <-c.histJob:
				c.hist.add(changes)
			case <-c.histDone:
			}
		}
		c.metrics.syncLatency.observeDuration(c.lastSync)
		if err != nil {
			// Nothing that depended on the failed sync is acknowledged,
			// even if a later sync would succeed: the kernel may have
			// dropped it.
			c.failStop(err)
			c.fail(g, err)
			return
		}
		c.stats.syncs.Add(1)
		// Durable: make it visible, publish it to watchers, then
		// acknowledge.
		c.apply(g.changes, g.rev)
		c.hist.publish(g.rev)
		c.ack(g)
	default:
		// Never, Interval, or the no-sync bug: visible and acknowledged
		// once written; published to watchers at the next sync (synced).
		c.apply(g.changes, g.rev)
		c.ack(g)
		c.kickFlush()
		// The history keeps what is not yet published, whatever its
		// size: past its bound, sync now, so that it publishes and the
		// bound holds. Without this, an unsynced bulk load kept every
		// change since the last checkpoint twice, in the map and in the
		// history (53 MB of 1M puts' 600 MB peak).
		if c.hist.pinned() {
			if err := c.syncLog(); err != nil {
				c.failStop(err)
			} else {
				c.synced()
				c.mark()
			}
		}
	}
	c.maybeCheckpoint()
}

// histDuringSync reports whether the flusher adds g's changes to the
// watch history while the committer syncs g, which takes that work (a
// copy of each change into memory the cache has long let go of) off the
// path from one sync to the next, onto a processor the sync leaves idle.
// Only under Always, when the flusher runs, and for a group small enough
// to wake it (flushWakeMax).
func (c *committer) histDuringSync(g *group) bool {
	return c.opts.Sync.kind == syncAlways && c.histJob != nil &&
		variant.Of(c.fs) != variant.AckBeforeSync &&
		len(g.changes) > 0 && len(g.changes) <= flushWakeMax
}

// ack answers every request of g.
func (c *committer) ack(g *group) {
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
func (c *committer) fail(g *group, err error) {
	err = withSpaceHint(c.dir, err)
	for _, r := range g.reqs {
		r.err = fmt.Errorf("%w: %w", ErrFailed, err)
		r.res, r.added = TxnResult{}, 0
		r.finish()
	}
}

// apply makes a group's changes visible to readers.
func (c *committer) apply(changes []staged, rev Revision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(changes, rev)
}

func (c *committer) applyLocked(changes []staged, rev Revision) {
	for _, ch := range changes {
		var err error
		// ch.prev is the key's state just before the change, as
		// evaluated: the map needs no read of the image to count keys.
		if ch.e == nil {
			err = c.m.DeleteLater([]byte(ch.key), ch.prev != nil)
		} else {
			err = c.m.LoadLater(ch.e, ch.prev != nil)
		}
		if err != nil {
			// The image could not say whether it holds the key (a read
			// of it failed): the change is durable in the log, but the
			// map cannot take it. Writes stop; a reopen replays it.
			c.failStop(fmt.Errorf("applying revision %d to the map: %w", rev, err))
		}
	}
	c.m.SetRevision(rev)
	c.applyLeases()
}

// appendLog writes a group's records with one write.
func (c *committer) appendLog(payloads [][]byte) error {
	if _, err := c.w.Append(payloads...); err != nil {
		return err
	}
	n := int64(0)
	for _, p := range payloads {
		n += int64(len(p) + wal.HeaderSize)
	}
	c.sinceSnap += n
	c.stats.bytes.Add(n)
	c.stats.records.Add(int64(len(payloads)))
	c.stats.groups.Add(1)
	c.metrics.groupSize.observe(float64(len(payloads)))
	return nil
}

// mark tells readers in other processes how far the log is durable (a
// mark record, not synced: see wal.Writer.Mark), once the committer has
// had nothing to do for markDelay. A read-only open shows only the
// records a later record claims durable: without marks, a reader beside
// an idle writer would never see the writer's last group. A busy writer
// needs none: each group's records claim the sync before them.
func (c *committer) mark() {
	if err := c.w.Mark(); err != nil {
		c.failStop(err)
	}
}

// markDelay is how long the committer waits, idle, before it marks the
// log: long enough that a writer that commits one write after another
// adds no mark between them, short enough that a reader in another
// process sees a write soon after the writer went idle.
const markDelay = time.Millisecond

// failStop records the first write or sync failure; from then on every
// write returns ErrFailed.
func (c *committer) failStop(err error) {
	err = withSpaceHint(c.dir, err)
	if c.failed.CompareAndSwap(nil, &err) {
		c.log.Error("log write failed; refusing writes until reopened", "dir", c.dir, "err", err)
		c.hist.finish(fmt.Errorf("%w: %w", ErrFailed, err))
	}
}

// synced records that a sync made every record logged so far durable:
// the watch history publishes their changes.
func (c *committer) synced() { c.hist.publish(c.lastRev) }

// syncLog syncs the log outside a commit (the interval's tick, Sync) and
// observes how long it took, as a commit's sync does.
func (c *committer) syncLog() error {
	start := time.Now()
	err := c.w.Sync()
	if err == nil {
		c.metrics.syncLatency.observeDuration(time.Since(start))
	}
	return err
}
