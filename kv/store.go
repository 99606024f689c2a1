package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path"
	"sync"
	"sync/atomic"

	"github.com/kvstore/kv/internal/lockfile"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// LockName is the lock file's name in the data directory.
const LockName = recovery.LockName

// Store is an open data directory. It serves reads from its snapshot's
// image, mapped from disk, under the changes since the last checkpoint,
// which it keeps in memory (package layered), and makes every
// acknowledged write durable through the write-ahead log. It is safe for
// concurrent use.
type Store struct {
	dir  string
	opts Options
	fs   vfs.FS
	log  *slog.Logger
	lock vfs.File
	// writerLive is, for a read-only open that found a writer holding
	// the lock, the writer's pid, or -1 when it cannot be named; 0 when
	// it found none.
	writerLive int
	// maxRecord is the log's maximum record size: check refuses a write
	// whose record would be bigger.
	maxRecord int

	// The visible map, the fail-stop cause, the counters and the hand-off
	// to the committer (see committer.go).
	*shared

	// closeMu orders the closed check of a writer against Close: closed
	// is set under it, and a writer checks it and queues its request
	// under its read lock. Readers check closed alone.
	closeMu sync.RWMutex
	closed  atomic.Bool
	// closeDone is closed once the first Close has closed the store, with
	// closeErr its result: every other Close waits for it.
	closeDone chan struct{}
	closeErr  error

	// c is the committer: nil for a read-only store.
	c *committer

	recovery recovery.Result
}

// Open opens the store in dir: it takes the directory's lock and runs
// recovery. opts may be nil. It returns once the snapshot's image is
// open and the log since it replayed into memory; the ordered tree of
// those changes behind Scan may still be building on another goroutine
// (bench/README.md has its time for a million keys), and a Scan waits for
// it.
//
// A directory that is missing or empty gets a new store (and the
// directory, with its parents, is created), unless Options.NoCreate or
// ReadOnly is set: then Open fails with an error matching ErrNoStore. A
// directory that holds files and is not a store (FORMAT.md, "The data
// directory") fails with an error matching ErrNotDataDir, before anything
// in it is read as data or created, LOCK included. An Open that fails
// while creating a store removes what it created, the directory included
// when it made it: a failed Open leaves the directory as it found it.
func Open(dir string, opts *Options) (*Store, error) {
	return OpenContext(context.Background(), dir, opts)
}

// OpenContext is Open with a context that bounds the wait for the lock
// when Options.WaitForLock is set.
func OpenContext(ctx context.Context, dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Store{dir: dir, opts: o, fs: o.fs(), log: o.logger(), maxRecord: o.walOptions().MaxRecordSize,
		closeDone: make(chan struct{})}
	// Whether there is a store here is asked before anything is created,
	// the lock file included; recovery asks again under the lock.
	kind, err := recovery.Identify(s.fs, dir)
	if err != nil {
		return nil, err
	}
	if !kind.HoldsStore() && (o.NoCreate || o.ReadOnly) {
		why := "Options.NoCreate forbids creating one"
		if o.ReadOnly {
			why = "a read-only open creates nothing"
		}
		return nil, &recovery.NoStoreError{Dir: dir, Missing: kind == recovery.DirMissing, Why: why}
	}
	undo, err := s.prepareDir(kind)
	if err != nil {
		return nil, describeOpenError(dir, err)
	}
	if err := s.takeLock(ctx); err != nil {
		// The lock is not ours: nor is LOCK, which another process may
		// hold. Only a directory that is still empty goes.
		undo.removeDir(s.fs)
		return nil, describeOpenError(dir, err)
	}
	res, err := recovery.Recover(s.fs, dir, recovery.Options{
		WAL: o.walOptions(), ReadOnly: o.ReadOnly, Logger: s.log, DeferCheckpoint: true,
		NoCreate: o.NoCreate, VerifyImage: o.VerifyImage, RetainLog: o.logRetention(),
		// A read-only open that gets the lock, shared, has no live
		// writer beside it: it vouches for a dead writer's last records.
		LockShared: readOnlyLock(o.ReadOnly, s.lockShared),
	})
	if err != nil {
		// The files of a store whose creation failed go, LOCK last,
		// while the lock is held.
		undo.run(s.fs)
		s.unlock()
		undo.removeDir(s.fs)
		return nil, describeOpenError(dir, err)
	}
	s.recovery = *res
	s.recovery.Map, s.recovery.Writer, s.recovery.Leases = nil, nil, nil
	leaseGrace(s.fs, res.Leases, o.clock())
	s.shared = &shared{m: res.Map,
		hist: newHistory(res.Map.Revision(), o.watchHistoryBytes()), metrics: newMetrics(), leases: res.Leases, clock: o.clock()}
	if o.ReadOnly {
		return s, nil
	}
	c := newCommitter(s.shared, s.fs, dir, s.log, o, res.Writer)
	c.covered = res.Snapshot.Covered
	if res.Checkpointed {
		c.covered = res.Writer.Segment() - 1
	} else {
		c.sinceSnap = res.ReplayedBytes
		c.ckptAtStart = checkpointAfterRecovery(res, o.checkpointBytes())
	}
	s.c = c
	if c.ckptAtStart || c.evalLeases.Len() > 0 {
		c.ensureStarted()
	}
	return s, nil
}

// readOnlyLock is lock for a read-only open, nil for a writer's.
func readOnlyLock(readOnly bool, lock func() (func(), error)) func() (func(), error) {
	if !readOnly {
		return nil
	}
	return lock
}

// prepareDir makes the directory when it is missing, and returns what to
// undo if the open fails: when the open creates a store (kind is missing
// or empty), every file the open adds, and the directory if it made it.
func (s *Store) prepareDir(kind recovery.DirKind) (*openUndo, error) {
	u := &openUndo{dir: s.dir}
	switch kind {
	case recovery.DirEmpty:
		names, err := s.fs.List(s.dir)
		if err != nil {
			return nil, err
		}
		u.creating, u.before = true, names
	case recovery.DirMissing:
		if s.opts.ReadOnly {
			return u, nil
		}
		// The first missing ancestor, the one whose removal undoes
		// MkdirAll.
		top := path.Clean(s.dir)
		for p := path.Dir(top); p != top; p = path.Dir(p) {
			_, err := s.fs.Stat(p)
			if err == nil {
				break
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			top = p
		}
		if err := s.fs.MkdirAll(s.dir, s.opts.dirMode()); err != nil {
			return nil, err
		}
		u.creating, u.madeTop = true, top
		// The new directory's own name must survive a power loss, or the
		// records acknowledged in it would vanish with it.
		if err := vfs.SyncDir(s.fs, path.Dir(top)); err != nil {
			u.removeDir(s.fs)
			return nil, err
		}
	}
	return u, nil
}

func (s *Store) takeLock(ctx context.Context) error {
	name := path.Join(s.dir, LockName)
	if s.opts.ReadOnly {
		// A read-only open takes no lock to read: it never keeps a writer
		// out. It asks for the lock, shared, only to vouch for records no
		// writer claimed synced (lockShared).
		return nil
	}
	var f vfs.File
	var err error
	if s.opts.WaitForLock {
		f, err = vfs.LockWait(ctx, s.fs, name, true)
	} else {
		f, err = s.fs.Lock(name, true)
	}
	if err == nil {
		s.lock = f
		s.namePID(f)
		return nil
	}
	if !errors.Is(err, vfs.ErrLocked) {
		return err
	}
	lerr := &LockedError{Dir: s.dir, PID: lockfile.Holder(s.fs, name)}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", lerr, ctx.Err())
	}
	return lerr
}

// lockShared takes LOCK shared for a read-only open's recovery
// (recovery.Options.LockShared), which asks for it only when the log ends
// in records no writer claimed synced: had, no writer is live, and the
// recovery vouches for them itself. A live writer's hold is noted, for
// Stats. A missing LOCK is not created (a read-only open changes
// nothing): without it, nothing is vouched for.
func (s *Store) lockShared() (func(), error) {
	name := path.Join(s.dir, LockName)
	unlock, err := lockShared(s.fs, name)
	if err != nil {
		s.log.Debug("read-only open without the lock", "dir", s.dir, "err", err)
		if errors.Is(err, vfs.ErrLocked) {
			s.writerLive = lockfile.Holder(s.fs, name)
			if s.writerLive == 0 {
				s.writerLive = -1
			}
		}
		return nil, err
	}
	return unlock, nil
}

// lockShared takes the existing lock file name shared, and returns how to
// let it go; a missing one is an error, not created.
func lockShared(fsys vfs.FS, name string) (func(), error) {
	if _, err := fsys.Stat(name); err != nil {
		return nil, err
	}
	f, err := fsys.Lock(name, false)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// namePID leaves in LOCK, locked by this open, what names this process
// to an open that finds it locked (FORMAT.md, "The data directory"). On
// a file system whose operating system names the holders of its locks
// (Linux: /proc/locks), nothing: LOCK is emptied when an older build
// left its pid there, which would name no one. Elsewhere, the pid. It is
// for error messages only, and need not be durable.
func (s *Store) namePID(f vfs.File) {
	// The write of the pid, which dirtied an inode for ext4's journal,
	// was a tenth of a reopen of 1M keys (bench/RESULTS.md): where the
	// OS names the holder, LOCK is left as it is when already empty.
	var pid []byte
	if !vfs.NamesLockHolders(s.fs) {
		pid = lockfile.PIDLine(os.Getpid())
	}
	// The pid's width is fixed, so that it overwrites the pid an earlier
	// open wrote, in place: a truncate (and the write after it) cost a
	// reopen of 1M keys about a fifth of its time on ext4.
	if size, err := vfs.Size(f); err != nil || size != int64(len(pid)) {
		f.Truncate(0)
	}
	if pid != nil {
		f.WriteAt(pid, 0)
	}
}

func (s *Store) unlock() {
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// Close commits the writes accepted before it, waits for a running
// checkpoint, writes one when Options.CloseCheckpointBytes of log or more
// were written since the last (4 MiB by default: the next open then
// replays next to nothing), syncs the log, and releases the lock. Every Close returns
// only once the store is closed: one called during another's waits for
// it, and every Close returns what the first one returned. Every other
// method returns ErrClosed after Close.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed.Load() {
		s.closeMu.Unlock()
		<-s.closeDone
		return s.closeErr
	}
	s.closed.Store(true)
	s.closeMu.Unlock()
	s.closeErr = s.close()
	close(s.closeDone)
	return s.closeErr
}

// close does the work of the first Close.
func (s *Store) close() error {
	var err error
	if s.c != nil {
		if s.c.stopStart() {
			close(s.c.quit)
			<-s.c.done
		}
		err = s.c.w.Close()
		if err == nil && s.failed.Load() == nil {
			s.c.synced() // Close synced the log
		}
		s.hist.finish(ErrClosed)
		if f := s.failed.Load(); f != nil && err != nil {
			err = nil // already reported as ErrFailed to the writes
		}
	}
	// The recovery's tree, if still being built, is waited for: no
	// goroutine of the store outlives Close.
	s.mu.Lock()
	s.m.Build()
	s.m.Close() // the image: a Get in flight on it finds it closed, and the store closed
	s.mu.Unlock()
	s.unlock()
	return err
}

// Get returns the entry of key, or a *NotFoundError naming the key, which
// matches ErrNotFound; ErrClosed after Close. It reads the changes since
// the last checkpoint in memory, and the snapshot's image for a key they
// do not hold (a page or two of the mapped file, each verified on its
// first read: damage there is an error matching ErrCorrupt, naming the
// file and offset, and a read the disk fails one matching
// vfs.ErrMapFault). It never waits for a commit in progress. Under Always
// it returns only durable state, so a revision it returns is a safe
// fencing token.
func (s *Store) Get(key []byte) (Entry, error) {
	e, _, err := s.get(nil, key)
	return e, err
}

// GetAppend is Get for a caller that reads entries one at a time and
// keeps none: an entry read from the snapshot's image has its Key and
// Value appended to buf (grown when it has no room), which it returns,
// rather than copied into memory of their own. Such an entry points into
// the returned slice, and is valid until the caller reuses it; a caller
// that passes it back (as out[:0]) reads image entries without
// allocating, as bbolt's and pebble's callers copy values into a buffer
// they reuse. An entry written since the last checkpoint points into the
// store's memory, as Get's does, and leaves buf as it was. Errors are
// Get's; on an error, out is buf.
func (s *Store) GetAppend(buf, key []byte) (e Entry, out []byte, err error) {
	return s.get(buf, key)
}

// get is Get and GetAppend: an entry read from the image is appended to
// buf, which is nil for Get (memory of the entry's own).
func (s *Store) get(buf, key []byte) (Entry, []byte, error) {
	for {
		if s.closed.Load() {
			return Entry{}, buf, ErrClosed
		}
		s.mu.RLock()
		e, deleted, ok := s.m.Change(key)
		base := s.m.Base()
		hidden := s.leases.Len() > 0 && s.hidden(key) // its lease's deadline has passed
		s.mu.RUnlock()
		out := buf
		if !ok && !hidden && base != nil {
			// The image, read outside the lock: it never changes, and
			// the state it gives is the state when the lock was held.
			// A checkpoint may close it meanwhile, having swapped in the
			// next: then read again.
			var err error
			if e, out, ok, err = base.GetAppend(buf, key); errors.Is(err, image.ErrClosed) {
				continue
			} else if err != nil {
				return Entry{}, buf, fmt.Errorf("kv: get %q: %w", key, err)
			}
		}
		if !ok || deleted || hidden {
			return Entry{}, buf, &NotFoundError{Key: bytes.Clone(key)}
		}
		return e, out, nil
	}
}

// Err reports whether the store serves: ErrClosed once Close has been
// called; an error matching ErrFailed, and wrapping the cause, once a
// write or sync of the log failed (reads go on, writes are refused);
// nil otherwise. It is how a caller of Revision, Len and Stats, which
// have no error result, tells a closed store from an empty one.
func (s *Store) Err() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if f := s.failed.Load(); f != nil {
		return fmt.Errorf("%w: %w", ErrFailed, *f)
	}
	return nil
}

// Revision returns the revision of the last committed record, and 0
// after Close (Err then returns ErrClosed).
func (s *Store) Revision() Revision {
	if s.closed.Load() {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.Revision()
}

// Len returns the number of keys, and 0 after Close (Err then returns
// ErrClosed).
func (s *Store) Len() int {
	if s.closed.Load() {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.Len()
}

// Scan returns the entries with start <= key < end, in key order; a nil
// end means no upper bound. It iterates over a copy-on-write view taken
// when the iteration starts, so it never blocks writers and sees no write
// committed after it began. A Scan started after Close yields nothing,
// and one that meets damage in the snapshot's image stops there: use
// ScanErr to tell either from the end of the range.
//
// The entries it yields stay valid as long as they are held: those
// written since the last checkpoint point into the store's memory, and
// those read from the snapshot's image are copies (ScanView skips the
// copies). Until the loop ends, the view holds the store's memory as it
// was when the scan started, and the image it began on, which a
// checkpoint meanwhile replaces but cannot unmap: every chunk (up to 1
// MiB) that held a changed entry then, not only the chunks of the
// entries yielded so far (see Entry). Versions that writes replace or
// delete meanwhile cannot be freed, nor the chunks the store compacts: a
// scan held open while every key is rewritten keeps up to about one more
// copy of the changes. Keep scans short under heavy writes.
func (s *Store) Scan(start, end []byte) iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for e, err := range s.ScanErr(start, end) {
			if err != nil || !yield(e) {
				return
			}
		}
	}
}

// ScanErr is Scan reporting an error: after Close it yields one zero
// Entry with ErrClosed and stops; otherwise it yields Scan's entries,
// each with a nil error. The view is taken when the iteration starts,
// so a Close during the loop does not end it.
//
//	for e, err := range s.ScanErr(start, end) {
//		if err != nil {
//			return err
//		}
//		...
//	}
func (s *Store) ScanErr(start, end []byte) iter.Seq2[Entry, error] {
	return s.scan(start, end, true)
}

// ScanView is ScanErr without the copies: the Key and Value of an entry
// it yields are valid only until the loop's next step, as bbolt's and
// pebble's iterators give theirs. Copy what you keep (bytes.Clone). A
// scan of keys not written since the last checkpoint reads them from the
// snapshot's image, and ScanErr copies each block it reads into memory
// of its own, so that the entries stay valid; ScanView reads every block
// into one buffer, and so scans several times as fast and allocates
// nothing per entry (bench/README.md has the figures).
func (s *Store) ScanView(start, end []byte) iter.Seq2[Entry, error] {
	return s.scan(start, end, false)
}

// scan is ScanErr when stable, ScanView when not.
func (s *Store) scan(start, end []byte, stable bool) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if s.closed.Load() {
			yield(Entry{}, ErrClosed)
			return
		}
		// Clone writes to the tree's copy-on-write bookkeeping, so it needs
		// the write lock, for as long as a pointer copy takes.
		s.mu.Lock()
		view, err := s.m.Clone()
		hide := s.dueKeys() // keys whose lease's deadline has passed
		s.mu.Unlock()
		if err != nil {
			yield(Entry{}, err)
			return
		}
		defer view.Close()
		all := view.All(start, end)
		if stable {
			all = view.AllStable(start, end)
		}
		for e, err := range all {
			if err != nil {
				yield(Entry{}, fmt.Errorf("kv: scan: %w", err))
				return
			}
			if hide != nil {
				if _, ok := hide[string(e.Key)]; ok {
					continue
				}
			}
			if !yield(*e, nil) {
				return
			}
		}
	}
}

// ScanPrefix returns the entries whose key starts with prefix, in key
// order, as Scan does.
func (s *Store) ScanPrefix(prefix []byte) iter.Seq[Entry] {
	return s.Scan(prefix, prefixEnd(prefix))
}

// ScanPrefixErr is ScanPrefix reporting an error, as ScanErr does.
func (s *Store) ScanPrefixErr(prefix []byte) iter.Seq2[Entry, error] {
	return s.ScanErr(prefix, prefixEnd(prefix))
}

// prefixEnd returns the smallest key greater than every key with the
// prefix, or nil when there is none.
func prefixEnd(prefix []byte) []byte {
	end := []byte(string(prefix))
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
