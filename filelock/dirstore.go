package filelock

import (
	"context"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
)

// dirBackend is the backend of a short-lived process: each operation
// opens the store in dir, does its work and closes it, so that the one
// writer process the store admits is never kept for long. Writes open
// it for writing, waiting for the writer lock (kv.Options.WaitForLock)
// as long as the caller's context allows; reads open it read-only, which
// shows every write a closed writer acknowledged, and never waits.
type dirBackend struct {
	dir  string
	opts kv.Options
	// busy bounds an open's wait for the writer lock (WithBusyTimeout):
	// negative, the caller's context alone; 0, no wait.
	busy time.Duration
}

// DefaultStoreOptions are the store options of Open, unless
// WithStoreOptions gives others. A lock store is small and opened for
// every operation. Its own checkpoints are off (a negative
// CheckpointBytes): under kv's default its log would grow to 64 MiB
// between two, and every short-lived open would replay all of it;
// instead, a writer's open that replayed more than CheckpointAfter bytes
// of log checkpoints before it closes. Its log is not preallocated
// (NoPreallocate), which keeps the files of a lock store small; an
// acquire and release take the same time either way (bench/RESULTS.md).
var DefaultStoreOptions = kv.Options{NoPreallocate: true, CheckpointBytes: -1}

// CheckpointAfter is the log replayed at an open past which the lock
// library checkpoints the store before closing it, when the store's own
// checkpoints are off (a negative CheckpointBytes, as in
// DefaultStoreOptions): about a hundred lock operations.
const CheckpointAfter = 64 << 10

// closeWriter closes a store opened for writing, checkpointing first if
// its open replayed much log and the store does not checkpoint itself.
func (d *dirBackend) closeWriter(s *kv.Store) error {
	if d.opts.CheckpointBytes < 0 && s.Stats().RecoveryBytes >= CheckpointAfter {
		if err := s.Checkpoint(); err != nil {
			s.Close()
			return err
		}
	}
	return s.Close()
}

// open opens the store. A read-only open never waits. An open for
// writing that finds the store's LOCK taken waits in the kernel's flock
// for its holder to close the store (kv.Options.WaitForLock), for as
// long as the busy timeout and ctx allow: the lock passes to a waiter
// the moment it is let go, with no sleep between tries.
func (d *dirBackend) open(ctx context.Context, readOnly bool) (*kv.Store, error) {
	o := d.opts
	o.ReadOnly, o.WaitForLock = readOnly, !readOnly
	if !readOnly && d.busy >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.busy)
		defer cancel()
	}
	return kv.OpenContext(ctx, d.dir, &o)
}

func (d *dirBackend) Get(ctx context.Context, key string) (lockstore.KeyValue, bool, error) {
	s, err := d.open(ctx, true)
	if err != nil {
		return lockstore.KeyValue{}, false, err
	}
	defer s.Close()
	return storeBackend{s}.Get(ctx, key)
}

func (d *dirBackend) Range(ctx context.Context, prefix string) ([]lockstore.KeyValue, int64, error) {
	s, err := d.open(ctx, true)
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	return storeBackend{s}.Range(ctx, prefix)
}

func (d *dirBackend) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	s, err := d.open(ctx, false)
	if err != nil {
		return lockstore.TxnResult{}, err
	}
	res, err := storeBackend{s}.Txn(ctx, t)
	if cerr := d.closeWriter(s); err == nil {
		err = cerr
	}
	return res, err
}

// Session opens the store for writing once for a run of operations.
func (d *dirBackend) Session(ctx context.Context) (lockstore.Backend, func() error, error) {
	s, err := d.open(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	return storeBackend{s}, func() error { return d.closeWriter(s) }, nil
}

// Wait watches the store's directory (kv.WatchDir: inotify on the
// segments, reading only what the writer made durable) for a change of a
// key under prefix after rev.
func (d *dirBackend) Wait(ctx context.Context, prefix string, rev int64) error {
	return waitWatch(kv.WatchDir(ctx, d.dir, &d.opts, []byte(prefix), kv.Revision(rev+1)))
}
