package kv

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/layered"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// The committer is the store's one writing goroutine. Writers hand it
// requests (request.go); it gathers the waiting ones into a group
// (gather.go), evaluates each against the state the earlier ones leave
// (evaluate.go), logs the group with one write and one sync, makes it
// visible and acknowledges it (commit.go). Beside it run the flusher,
// which brings the ordered tree up to date (flusher.go), and at most one
// background checkpoint (checkpoint.go).
//
// Its invariants, which the crash checkers and the linearizability tests
// hold it to:
//
//   - Records are logged in revision order, one revision each, with no
//     gap: a group's records follow the last group's.
//   - Changes become visible in revision order, a group at a time, and
//     never before they are logged.
//   - Under Always, a request is acknowledged, and its changes made
//     visible, only after the sync that makes its record durable; a
//     failed write or sync acknowledges nothing of its group, and nothing
//     after it (fail-stop).
//   - It is the map's only writer: Get and Scan read under the read lock,
//     evaluation reads the map without a lock, apply writes it under the
//     write lock.
//   - A checkpoint's segments are deleted only after the snapshot that
//     covers them is durable (recovery.WriteCheckpoint).

// shared is the state the committer shares with the store's other
// goroutines. The committer is its only writer but for the hand-off,
// where writers count themselves in and out.
type shared struct {
	// The visible state, what Get and Scan see: only the committer
	// changes it, under mu, after the records are durable (under Always).
	mu sync.RWMutex
	m  *layered.Map

	// failed is the first write or sync failure, set by the committer
	// once; from then on every write returns ErrFailed.
	failed atomic.Pointer[error]
	stats  statCounters
	// metrics are the histograms the committer observes into.
	metrics *metrics
	// hist is the watch history: the committer adds and publishes,
	// watchers read (see history).
	hist *history

	// leases is the visible lease table, changed with m under mu (see
	// lease_commit.go); clock is the time its deadlines are read against.
	// expired remembers the leases the committer ended at their
	// deadline, for errors (see LeaseError).
	leases       *record.Leases
	clock        Clock
	endedMu      sync.Mutex
	expired      map[LeaseID]int64
	expiredOrder []LeaseID

	// The hand-off. A writer counts itself in writers, queues its
	// request on reqs and waits; leave counts it out, which a committer
	// waiting for writers to come back (gather) sees at its next poll.
	// reqs is nil until the committer starts (ensureStarted).
	reqs    chan *request
	writers atomic.Int64
}

// committer owns the log and the group being formed. Only its goroutine
// (run) touches the fields below "Owned by the committer goroutine",
// and the functions it runs for the store (control).
type committer struct {
	*shared

	// Set at open, never changed.
	fs   vfs.FS
	dir  string
	log  *slog.Logger
	opts Options
	// w is the log. Its methods are the committer's alone, but for
	// Segment, which Stats calls from any goroutine, and Close, which
	// the store calls once the committer has stopped.
	w *wal.Writer

	// How the store talks to it: ctl runs a function between groups,
	// closing quit stops it (after the writes queued before), and done
	// is closed once it has stopped. flush wakes the flusher.
	ctl   chan func()
	quit  chan struct{}
	done  chan struct{}
	flush chan struct{}
	// startOnce starts the committer once (ensureStarted); running says
	// it did, read after startOnce.
	startOnce sync.Once
	running   bool
	// histJob hands the flusher a group's changes for the watch
	// history, and histDone says it has added them (see histDuringSync);
	// nil until the flusher runs.
	histJob  chan []staged
	histDone chan struct{}

	// gatherGap and gatherWait bound gather's wait for writers (the
	// constants of the same names; a test lengthens them).
	gatherGap, gatherWait time.Duration

	// Owned by the committer goroutine.
	covered   wal.SegmentNum           // segments up to here are in a durable snapshot
	sinceSnap int64                    // bytes logged since the last snapshot started
	ckpt      chan checkpointResult    // the running background checkpoint, or nil
	ckptWait  []chan error             // Checkpoint callers waiting for it
	overlay   map[string]*record.Entry // changes logged but not yet visible
	readErr   error                    // the first failed read of the image in the request being evaluated
	scratch   scratch                  // the staged entries of the group being committed
	mine      map[string]*record.Entry // a big transaction's own changes, while it is evaluated
	buf       []byte                   // the group's records, encoded
	lastRev   Revision                 // the last revision given to a record
	g         group                    // the group being formed
	lastSync  time.Duration            // how long the last sync took
	// ckptAtStart asks the committer to checkpoint what recovery
	// replayed as soon as it starts.
	ckptAtStart bool
	// evalLeases is the committer's lease table, ahead of the visible
	// one by the group being formed; expiry fires at expiryAt, the
	// earliest deadline (see lease_commit.go).
	evalLeases *record.Leases
	expiry     <-chan time.Time
	expiryAt   int64
}

// newCommitter returns a committer that appends to w (nil for a
// committer that only evaluates, as in tests) after the map in sh.
func newCommitter(sh *shared, fsys vfs.FS, dir string, log *slog.Logger, opts Options, w *wal.Writer) *committer {
	if sh.leases == nil {
		sh.leases = record.NewLeases()
	}
	if sh.clock == nil {
		sh.clock = opts.clock()
	}
	return &committer{
		shared: sh, fs: fsys, dir: dir, log: log, opts: opts, w: w,
		ctl: make(chan func()), quit: make(chan struct{}), done: make(chan struct{}),
		flush:     make(chan struct{}, 1),
		gatherGap: gatherGap, gatherWait: gatherWait,
		overlay:    map[string]*record.Entry{},
		lastRev:    sh.m.Revision(),
		evalLeases: sh.leases.Clone(),
	}
}

// start runs the committer and the flusher.
func (c *committer) start() {
	// The queue is made here, not at Open: its 8 KiB were a new
	// process's first writes to fresh pages, 3% of a reopen's time.
	c.reqs = make(chan *request, 1024)
	c.histJob, c.histDone = make(chan []staged, 1), make(chan struct{}, 1)
	c.running = true
	go c.flusher(c.histJob, c.histDone)
	go c.run()
}

// ensureStarted starts the committer unless it runs already. A store
// starts it at its first write or control request (or at Open, when it
// has work of its own: a checkpoint after recovery, leases to expire),
// so that a process that only reads pays for no goroutine and no thread:
// starting them was an eighth of a reopen's time.
func (c *committer) ensureStarted() { c.startOnce.Do(c.start) }

// stopStart keeps the committer from starting, and says whether it ran
// (Close: a committer that never ran has nothing to commit or wait for).
func (c *committer) stopStart() bool {
	c.startOnce.Do(func() {})
	return c.running
}

// run is the committer: it takes the waiting writes as one group,
// evaluates them in order, logs them with one write and one sync, applies
// them to the visible map and acknowledges them. While it syncs, the next
// group gathers in the channel.
func (c *committer) run() {
	defer close(c.done)
	defer close(c.flush)
	var tick <-chan time.Time
	if c.opts.Sync.kind == syncInterval && c.opts.Sync.interval > 0 {
		t := time.NewTicker(c.opts.Sync.interval)
		defer t.Stop()
		tick = t.C
	}
	if c.ckptAtStart {
		c.startCheckpoint()
	}
	// idle fires once the committer has had nothing to do for markDelay
	// after a commit: then it marks the log (see mark).
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	for {
		c.armExpiry()
		select {
		case r := <-c.reqs:
			for n := 0; r != nil; n++ {
				c.begin()
				c.take(r)
				c.gather()
				c.commit()
				if n+1 == chainMax {
					break
				}
				r = c.awaitNext()
			}
			idle.Reset(markDelay)
		case <-c.expiry:
			c.expire()
			idle.Reset(markDelay)
		case <-idle.C:
			if c.failed.Load() == nil {
				c.mark()
			}
		case f := <-c.ctl:
			f()
		case res := <-c.ckpt:
			c.checkpointDone(res)
		case <-tick:
			if c.failed.Load() == nil {
				if err := c.syncLog(); err != nil {
					c.failStop(err)
				} else {
					c.synced()
					c.mark()
				}
			}
		case <-c.quit:
			// Writes accepted before Close are committed, not dropped,
			// in groups as the running store forms them: every writer
			// is queued by now (Close waited for those inside enqueue),
			// so there is no one to wait for, and one sync a write
			// would make Close take hundreds of syncs where one does.
			for {
				select {
				case r := <-c.reqs:
					c.begin()
					c.take(r)
					c.drain()
					c.commit()
					continue
				default:
				}
				break
			}
			// A deadline that passed before Close is committed by it: a
			// short-lived writer (kv DIR dump) leaves no lease behind
			// that its clock saw end.
			c.expire()
			if c.ckpt != nil {
				c.checkpointDone(<-c.ckpt)
			}
			c.closeCheckpoint()
			return
		}
	}
}

// syncAndMark makes every acknowledged write durable and marks the log
// (Store.Sync).
func (c *committer) syncAndMark() error {
	if f := c.failed.Load(); f != nil {
		return fmt.Errorf("%w: %w", ErrFailed, *f)
	}
	if err := c.syncLog(); err != nil {
		c.failStop(err)
		return err
	}
	c.synced()
	if err := c.w.Mark(); err != nil {
		c.failStop(err)
		return err
	}
	return nil
}

// requestCheckpoint queues wait for the end of the running checkpoint,
// starting one if none runs, and reports whether it started one
// (Store.Checkpoint).
func (c *committer) requestCheckpoint(wait chan error) (started bool, err error) {
	if f := c.failed.Load(); f != nil {
		return false, fmt.Errorf("%w: %w", ErrFailed, *f)
	}
	c.ckptWait = append(c.ckptWait, wait)
	if c.ckpt != nil {
		return false, nil
	}
	c.startCheckpoint()
	if c.ckpt == nil { // the rotation failed
		c.ckptWait = c.ckptWait[:len(c.ckptWait)-1]
		return false, fmt.Errorf("%w: %w", ErrFailed, *c.failed.Load())
	}
	return true, nil
}
