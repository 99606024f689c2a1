package kv

import (
	"path/filepath"
	"time"

	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/wal"
)

// maybeCheckpoint starts a background checkpoint when enough log has
// accumulated since the last one.
func (c *committer) maybeCheckpoint() {
	if cb := c.opts.checkpointBytes(); cb > 0 && c.sinceSnap >= cb && c.ckpt == nil {
		c.startCheckpoint()
	}
	if cap(c.buf) > 4<<20 {
		c.buf = nil
	}
}

// closeCheckpoint writes a checkpoint at Close when the log since the
// last one is at least Options.CloseCheckpointBytes, and waits for it:
// the next open then replays almost nothing. Its failure is counted and
// logged as a background checkpoint's is, and fails nothing: the log
// holds every write.
func (c *committer) closeCheckpoint() {
	cb := c.opts.closeCheckpointBytes()
	if cb <= 0 || c.sinceSnap < cb || c.failed.Load() != nil {
		return
	}
	c.startCheckpoint()
	if c.ckpt != nil {
		c.checkpointDone(<-c.ckpt)
	}
}

// startCheckpoint rotates the log, freezes a view of the map and writes
// it as the next image in the background; checkpointDone swaps the image
// in under the map. Writers wait only for the rotation.
func (c *committer) startCheckpoint() {
	if c.failed.Load() != nil {
		return
	}
	prev := c.covered
	done := make(chan checkpointResult, 1)
	var sealed wal.SegmentNum
	if c.w.HoldsRecords() {
		var err error
		if sealed, err = c.w.Rotate(); err != nil {
			c.failStop(err)
			return
		}
		c.synced() // the rotation's sync made every record before the seal durable
	} else {
		// Nothing was logged in the segment being appended to: the one
		// before it is sealed and holds every record, and a rotation
		// would only add an empty segment (one per failed checkpoint on
		// a full disk). When the snapshot covers it already there is
		// nothing to do.
		sealed = c.w.Segment() - 1
		if sealed <= prev {
			c.ckpt = done
			done <- checkpointResult{covered: prev, none: true}
			return
		}
	}
	c.mu.Lock()
	view, err := c.m.Freeze()
	leases := c.shared.leases.Clone() // the leases of the same revision
	c.mu.Unlock()
	c.sinceSnap = 0
	c.ckpt = done
	if err != nil {
		done <- checkpointResult{covered: prev, err: err}
		return
	}
	go func() {
		defer view.Close()
		start := time.Now()
		// The snapshot first, durable, then the covered segments: the
		// protocol recovery's checkpoint follows too.
		meta := snapshot.Meta{Covered: sealed, Revision: view.Revision(), Count: uint64(view.Len())}
		_, err := recovery.WriteCheckpointLeases(c.fs, c.dir, meta, leases.All(), view.AllOnce(nil, nil), c.opts.logRetention())
		var size int64
		var img *image.Reader
		if err == nil {
			// The image just published goes under the map (see
			// checkpointDone). One that does not open leaves the map
			// over the image it has, which stays mapped and serves: the
			// next checkpoint writes the whole state again.
			var oerr error
			if img, oerr = image.Open(c.fs, filepath.Join(c.dir, snapshot.Name)); oerr != nil {
				c.log.Warn("checkpoint: the new snapshot does not open; the map stays over the old one", "dir", c.dir, "err", oerr)
			} else if img.Revision() != view.Revision() {
				c.log.Warn("checkpoint: the snapshot is not the one written", "dir", c.dir, "revision", uint64(img.Revision()))
				img.Close()
				img = nil
			}
			// For Stats only: a failed stat leaves the bytes uncounted,
			// and says so in the log.
			if fi, serr := c.fs.Stat(filepath.Join(c.dir, snapshot.Name)); serr == nil {
				size = fi.Size()
			} else {
				c.log.Warn("checkpoint: snapshot size unknown", "dir", c.dir, "err", serr)
			}
		}
		c.log.Info("checkpoint", "dir", c.dir, "covered", sealed.String(), "revision", uint64(view.Revision()),
			"keys", view.Len(), "duration", time.Since(start), "err", err)
		done <- checkpointResult{covered: sealed, err: err, took: time.Since(start), bytes: size, img: img}
	}()
}

// checkpointResult is how a background checkpoint ended: covered is the
// last segment its snapshot covers, durable unless err.
type checkpointResult struct {
	covered wal.SegmentNum
	err     error
	took    time.Duration // how long it ran
	bytes   int64         // the snapshot's size, if it was written
	none    bool          // nothing to write: the snapshot was up to date
	img     *image.Reader // the snapshot written, opened, for the map
}

// checkpointDone runs in the committer when the background checkpoint
// ends.
func (c *committer) checkpointDone(res checkpointResult) {
	c.ckpt = nil
	if !res.none {
		c.swap(res.img)
	}
	err := withSpaceHint(c.dir, res.err)
	switch {
	case err == nil && res.none:
		// Up to date: nothing written, nothing to count.
	case err == nil:
		c.covered = res.covered
		c.stats.checkpoints.Add(1)
		c.metrics.checkpointTime.observeDuration(res.took)
		c.metrics.checkpointBytes.Add(res.bytes)
		c.metrics.lastCheckpoint.Store(res.bytes)
	default:
		c.stats.checkpointErrors.Add(1)
	}
	for _, ch := range c.ckptWait {
		ch <- err
	}
	c.ckptWait = nil
}

// swap puts img, the image a checkpoint wrote of the frozen view, under
// the map: what it holds leaves memory (layered.Map.Swap). A nil img (the
// checkpoint failed, or its image did not open) or a failed swap leaves
// the map as it is, over its old image, and forgets the frozen view.
func (c *committer) swap(img *image.Reader) {
	if img == nil {
		c.m.Thaw()
		return
	}
	c.mu.Lock()
	err := c.m.Swap(img)
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("checkpoint: the map stays over the old snapshot", "dir", c.dir, "err", err)
		img.Close()
		c.m.Thaw()
	}
}

// checkpointAfterRecovery decides whether a store starts with a
// checkpoint of what its recovery replayed (in the background: the store
// serves meanwhile): only when the replayed log is as long as the store
// lets its log grow between checkpoints (CheckpointBytes), as after a
// crash of a writer that had written that much. A shorter log is cheap to
// replay, and a checkpoint would rewrite the snapshot and start a segment
// at every open of a short-lived process: its bytes count towards the
// next checkpoint instead, as if written since. Call Checkpoint to write
// one at once.
func checkpointAfterRecovery(res *recovery.Result, checkpointBytes int64) bool {
	return res.Replayed > 0 && checkpointBytes > 0 && res.ReplayedBytes >= checkpointBytes
}
