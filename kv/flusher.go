package kv

// kickFlush wakes the flusher unless it is awake already.
func (c *committer) kickFlush() {
	select {
	case c.flush <- struct{}{}:
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
//
// It also adds a group's changes to the watch history while the group
// syncs, when the committer hands them over on jobs (committer.histJob,
// see histDuringSync), and says on done that it has, before it flushes.
func (c *committer) flusher(jobs <-chan []staged, done chan<- struct{}) {
	for {
		select {
		case changes := <-jobs:
			c.hist.add(changes)
			done <- struct{}{}
		case _, ok := <-c.flush:
			if !ok {
				return
			}
		}
		for left := 1; left > 0; {
			c.mu.Lock()
			left = c.m.FlushSome(flushPart)
			c.mu.Unlock()
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
