package filelock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// Option configures a Locker.
type Option func(*options)

type options struct {
	staleAfter  time.Duration
	strategy    Strategy
	strategySet bool
	slots       int
	holderDir   string
	store       kv.Options
	busy        time.Duration
	busySet     bool
}

// DefaultBusyTimeout bounds how long one operation of a Locker opened on
// a directory (Open) waits for the store's writer lock, which another
// process holds while it writes (another lock's acquire, a kv DIR put):
// the convention of SQLite's busy timeout, seconds rather than zero or
// forever. Past it the operation fails with an error matching
// kv.ErrLocked. WithBusyTimeout sets another.
const DefaultBusyTimeout = 10 * time.Second

// WithBusyTimeout sets how long one operation of a Locker opened on a
// directory waits for the store's writer lock (DefaultBusyTimeout); a
// negative d waits for as long as the operation's context allows, 0
// fails at once.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busy, o.busySet = d, true }
}

// WithStaleAfter sets the window after which a holder that has not
// renewed its marker (Holder.Extend) counts as dead, when the strategy
// consults time: always under TimeOnly, and as the fallback of
// KernelFirst and PIDFirst when their probes cannot tell. It is not a
// cap on how long a lock may be held. 0 (the default) means time never
// decides.
func WithStaleAfter(d time.Duration) Option { return func(o *options) { o.staleAfter = d } }

// WithStrategy sets how holders are judged alive; the default is
// KernelFirst, and Lease on a backend that has leases
// (lockstore.Leaser).
func WithStrategy(s Strategy) Option {
	return func(o *options) { o.strategy, o.strategySet = s, true }
}

// WithSlots makes every lock a semaphore of n holders (default 1). All
// holders of a lock must ask for the same n: a caller with another n gets
// ErrSlotsMismatch while any holder with the other count lives.
func WithSlots(n int) Option { return func(o *options) { o.slots = n } }

// WithHolderDir sets the directory of the holder files; the default is
// DIR/holders for Open and the store's directory's holders for New.
func WithHolderDir(dir string) Option { return func(o *options) { o.holderDir = dir } }

// WithStoreOptions sets the options Open uses to open the store for
// each operation (segment size, checkpoint threshold, logger) instead of
// DefaultStoreOptions. ReadOnly and WaitForLock are set by Open, and the
// sync mode must stay Always.
func WithStoreOptions(so kv.Options) Option { return func(o *options) { o.store = so } }

// maxSlots bounds WithSlots: each slot is a key the attempt compares.
const maxSlots = 1024

// Locker hands out locks whose state lives in a store. It is safe for
// concurrent use.
type Locker struct {
	b         lockstore.Backend
	holderDir string
	opts      options
	host      string
	boot      string
	pid       int
	start     uint64
	pidNS     uint64 // this process's pid namespace, recorded in its markers
	procNS    uint64 // the pid namespace /proc shows: pidNS, or 0 if /proc is another's

	leaseMu sync.Mutex
	lease   lockstore.Lease // under the Lease strategy: the holders' lease, once granted
}

// Open returns a Locker on the kv data directory dir, for a process that
// does not keep the store open: each operation opens the store (waiting
// for its writer lock as long as its context allows), commits, and
// closes it. It creates dir as a store if it does not hold one (it is
// missing or empty), and refuses a directory on a network file system.
func Open(dir string, opts ...Option) (*Locker, error) {
	o := buildOptions(opts)
	if _, err := os.Stat(filepath.Join(dir, HolderDirName)); errors.Is(err, fs.ErrNotExist) {
		// No holder directory yet, so perhaps no store: the store comes
		// first, since kv refuses to create one in a directory that
		// holds files (the holder directory). The store creates the
		// directory and makes its name durable; making it here would
		// not.
		if err := createStore(dir, o.store); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if o.holderDir == "" {
		o.holderDir = filepath.Join(dir, HolderDirName)
	}
	busy := DefaultBusyTimeout
	if o.busySet {
		busy = o.busy
	}
	return newLocker(&dirBackend{dir: dir, opts: o.store, busy: busy}, o)
}

// createStore makes sure dir holds a store before anything else goes
// into it (the holder directory above all, which would make kv refuse the
// directory as not a data directory): it opens, creating, and closes the
// store. When another process holds the store's lock, that process may be
// creating the store right now, and it writes the store's marker last:
// createStore waits until the directory holds a store (or the lock is
// free again, as after a creator's crash, and it can create the store
// itself), so that this process makes no holder directory beside a store
// whose creation has not finished.
func createStore(dir string, so kv.Options) error {
	so.ReadOnly = false
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		s, err := kv.Open(dir, &so)
		if err == nil {
			return s.Close()
		}
		if !errors.Is(err, kv.ErrLocked) {
			return err
		}
		kind, err := recovery.Identify(vfs.OS, dir)
		if err != nil {
			return err
		}
		if kind.HoldsStore() {
			return nil
		}
		time.Sleep(wait)
	}
}

// New returns a Locker on a store this process keeps open (the one
// writer process the store admits). The store's sync mode must be
// kv.Always, the default: under another, a crash can take back a
// revision handed out as a token.
func New(s *kv.Store, opts ...Option) (*Locker, error) {
	o := buildOptions(opts)
	if o.holderDir == "" {
		o.holderDir = filepath.Join(s.Dir(), HolderDirName)
	}
	return newLocker(StoreBackend(s), o)
}

// NewBackend returns a Locker on any lockstore.Backend, with its holder
// files in holderDir (on this host); with holderDir "" its holders keep
// none, and are judged by lease, pid or time only. On a backend that has
// leases (lockstore.Leaser, such as etcd's) the strategy is Lease unless
// WithStrategy says otherwise, and needs no holder files.
func NewBackend(b lockstore.Backend, holderDir string, opts ...Option) (*Locker, error) {
	o := buildOptions(opts)
	o.holderDir = holderDir
	if _, ok := b.(lockstore.Leaser); ok && !o.strategySet {
		o.strategy = Lease
	}
	return newLocker(b, o)
}

func buildOptions(opts []Option) options {
	o := options{slots: 1, store: DefaultStoreOptions}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func newLocker(b lockstore.Backend, o options) (*Locker, error) {
	switch {
	case o.slots < 1 || o.slots > maxSlots:
		return nil, fmt.Errorf("%w: %d slots (1 to %d)", ErrInvalid, o.slots, maxSlots)
	case o.strategy < KernelFirst || o.strategy > Lease:
		return nil, fmt.Errorf("%w: strategy %d", ErrInvalid, int(o.strategy))
	case o.strategy == TimeOnly && o.staleAfter <= 0:
		return nil, fmt.Errorf("%w: time-only needs a stale-after window", ErrInvalid)
	case o.staleAfter < 0:
		return nil, fmt.Errorf("%w: negative stale-after", ErrInvalid)
	}
	if _, ok := b.(lockstore.Leaser); o.strategy == Lease && !ok {
		return nil, fmt.Errorf("%w: the lease strategy needs a backend with leases (lockstore.Leaser)", ErrInvalid)
	}
	if kernelLocks && o.strategy != Lease && o.holderDir != "" {
		if err := os.MkdirAll(o.holderDir, 0o700); err != nil {
			return nil, err
		}
		if err := checkLocalFS(o.holderDir); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	ns := pidNamespace()
	return &Locker{b: b, holderDir: o.holderDir, opts: o, host: host, boot: bootID(), pid: os.Getpid(), start: selfStart(),
		pidNS: ns, procNS: procNamespace(ns)}, nil
}

// Info describes the holder of one slot of a lock, as judged now.
type Info struct {
	Marker
	Name   string
	Slot   int
	Key    string
	Token  int64 // the slot key's create revision
	Alive  bool
	Reason string // why it is judged alive or dead
}

// TryAcquire takes a slot of lock name if one is free or held by a dead
// holder, and otherwise fails at once with a *LockedError (ErrLocked)
// naming the holders.
func (l *Locker) TryAcquire(name string) (*Holder, error) {
	return l.acquire(context.Background(), name, true)
}

// Acquire takes a slot of lock name, waiting until one is free or its
// holder is found dead, or until ctx ends (then the error matches both
// ErrLocked and ctx's error). It waits for events, not by polling: the
// kernel reports a holder file's last close (its holder died or
// released) and the store directory's commits; timers cover what
// events cannot (a holder going stale by time).
func (l *Locker) Acquire(ctx context.Context, name string) (*Holder, error) {
	return l.acquire(ctx, name, false)
}

func (l *Locker) acquire(ctx context.Context, name string, try bool) (*Holder, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	nonce := newNonce()
	m := Marker{
		PID: l.pid, PIDStart: l.start, PIDNS: l.pidNS, BootID: l.boot, Host: l.host, Nonce: nonce,
		Slots: l.opts.slots, Strategy: l.opts.strategy.String(),
	}
	if l.opts.staleAfter > 0 {
		m.StaleAfter = l.opts.staleAfter.String()
	}
	var lease lockstore.Lease
	if l.opts.strategy == Lease {
		var err error
		if lease, err = l.currentLease(ctx); err != nil {
			return nil, err
		}
		m.Lease = lease.ID()
	}
	var file *os.File
	if kernelLocks && l.opts.strategy != Lease && l.holderDir != "" {
		m.HolderFile = name + "." + nonce + holderSuffix
		// The directory, by device and inode, so that a judge that
		// reaches another directory by the same path (another mount
		// namespace, WithHolderDir) does not probe a file of that name
		// there for this holder's.
		m.HolderDirDev, m.HolderDirIno = dirID(l.holderDir)
		var err error
		if file, err = createHolderFile(l.holderDir, m.HolderFile, m.encode()); err != nil {
			return nil, err
		}
	}
	q := &queue{key: waitKey(name, nonce)}
	drop := func() {
		if q.enqueued {
			l.dequeue(q)
		}
		if file != nil {
			// Unlink before close: a probe never finds the name unlocked
			// while the marker could still point at it.
			os.Remove(filepath.Join(l.holderDir, m.HolderFile))
			file.Close()
		}
	}
	renewed := 0
	for {
		h, le, watch, err := l.attempt(ctx, name, m, q, try)
		if errors.Is(err, lockstore.ErrLeaseEnded) && lease != nil && renewed < maxRenewals {
			// The lease ended while this process was paused or cut off,
			// before its keep-alive noticed: the keys bound to it are
			// gone, the wait key too. Take a new lease and try again.
			renewed++
			if lease, err = l.renewLease(ctx, lease); err == nil {
				m.Lease, q.enqueued = lease.ID(), false
				continue
			}
		}
		if err != nil {
			drop()
			return nil, err
		}
		if h != nil {
			h.file, h.lease = file, lease
			if q.queued && file != nil {
				// Wake the waiter behind: it watches this file for the
				// sign that its predecessor stopped waiting.
				os.Chtimes(filepath.Join(l.holderDir, m.HolderFile), time.Time{}, movedOn)
			}
			return h, nil
		}
		if try {
			drop()
			return nil, le
		}
		if err := l.waitChange(ctx, name, le, watch); err != nil {
			drop()
			return nil, fmt.Errorf("%w (%w)", le, err)
		}
	}
}

// raceRetries bounds the attempts of one session that lose a race (a
// compare failed because another process changed the lock meanwhile).
const raceRetries = 8

// watchSet is what a waiter waits on: files whose change may let it go,
// and the store's revision when it last looked.
type watchSet struct {
	holders []string  // holder files of the slots' holders: their close or unlink
	ahead   string    // the holder file of the waiter it queues behind
	stale   time.Time // when a holder becomes stale by time, if ever
	rev     int64
	poll    time.Duration // a bound on the wait, 0 for maxWait
}

// attempt tries once to take a slot, in one session of the store: read
// the lock's keys, judge, and commit one transaction whose compares pin
// every revision the judgment rests on. Exactly one of any number of
// racing attempts on the same state wins. An Acquire that finds no slot
// (or live waiters queued before it) queues, in the same session.
//
// A waiter already queued looks first without the session (on a
// directory, the store's writer lock): it reads the lock's state through
// the backend's reads (read-only opens), and takes the session only when
// it would write, to take a slot or clear a dead waiter. So a process
// that waits never keeps the store from the holder's own writes (a
// fenced put under kv DIR lock), however many wait beside it.
func (l *Locker) attempt(ctx context.Context, name string, m Marker, q *queue, try bool) (*Holder, *LockedError, *watchSet, error) {
	s, ok := l.b.(lockstore.Sessioner)
	if !ok {
		return l.attemptOn(ctx, l.b, name, m, q, try)
	}
	if q.enqueued && !try {
		pb := &peekBackend{Backend: l.b}
		h, le, ws, err := l.attemptOn(ctx, pb, name, m, q, try)
		if !pb.wrote && !errors.Is(err, errWouldWrite) {
			return h, le, ws, err
		}
	}
	sb, end, err := s.Session(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	defer end()
	return l.attemptOn(ctx, sb, name, m, q, try)
}

// peekBackend is a backend's reads alone: a write is not made, and is
// noted, for an attempt that looks before it takes a session.
type peekBackend struct {
	lockstore.Backend
	wrote bool
}

// errWouldWrite is a peekBackend's answer to a write.
var errWouldWrite = errors.New("filelock: a look without the session would write")

func (p *peekBackend) Txn(context.Context, lockstore.Txn) (lockstore.TxnResult, error) {
	p.wrote = true
	return lockstore.TxnResult{}, errWouldWrite
}

// attemptOn is attempt's work on backend b: a session, the backend
// itself, or a peek.
func (l *Locker) attemptOn(ctx context.Context, b lockstore.Backend, name string, m Marker, q *queue, try bool) (*Holder, *LockedError, *watchSet, error) {
	for range raceRetries {
		kvs, rev, err := b.Range(ctx, namePrefix(name))
		if err != nil {
			return nil, nil, nil, err
		}
		now := time.Now()
		st := parseLock(name, kvs)
		n := l.opts.slots
		ws := &watchSet{rev: rev}
		ahead := l.queueAhead(ctx, b, st, q)
		le := &LockedError{Name: name, Waiting: len(ahead)}
		cmp := []lockstore.Compare{lockstore.ModRevIs(slotsKey(name), st.slotsRev)}
		var ops []lockstore.Op
		held := st.slots
		if st.n != n {
			// The lock's slot count changes: only when every holder
			// under the old count is dead, each removed under a compare
			// on the revision judged.
			for _, s := range st.slots {
				if ok, _ := l.judge(&s.Marker, now); ok {
					return nil, nil, nil, &SlotsError{Name: name, Want: n, Have: st.n}
				}
				cmp = append(cmp, lockstore.ModRevIs(s.Key, s.ModRev))
				ops = append(ops, lockstore.Delete(s.Key))
			}
			ops = append(ops, lockstore.Put(slotsKey(name), []byte(strconv.Itoa(n))))
			held = nil
		}
		m.Acquired, m.Renewed = now, now
		slot, taken := -1, (*slotState)(nil)
		for i := range n {
			if _, ok := held[i]; !ok {
				slot = i
				break
			}
		}
		if slot < 0 {
			for i := range n {
				s := held[i]
				ok, why := l.judge(&s.Marker, now)
				s.Alive, s.Reason = ok, why
				le.Holders = append(le.Holders, s.Info)
				if !ok && slot < 0 {
					slot, taken = i, s
				}
				switch {
				case l.seesHolderFile(&s.Marker):
					ws.holders = append(ws.holders, s.HolderFile)
				case s.Lease == 0:
					ws.poll = pidPoll
				}
				// A leased holder's end is a change of the store (its
				// key deleted), which the backend's Wait reports.
				if t, ok := l.staleAt(&s.Marker); ok && (ws.stale.IsZero() || t.Before(ws.stale)) {
					ws.stale = t
				}
				if l.opts.strategy == PIDFirst || l.opts.strategy == PIDOnly {
					ws.poll = pidPoll // a pid's death gives no event
				}
			}
		}
		// Waiters queued before this one go first, as long as they act:
		// one that leaves a free slot untaken for headGrace is passed.
		if !try && slot >= 0 && len(ahead) >= n {
			if q.stuck.IsZero() {
				q.stuck = now
			}
			if now.Sub(q.stuck) < headGrace {
				ws.ahead = ahead[len(ahead)-n].HolderFile
				ws.poll = headGrace
				slot = -1
			}
		} else {
			q.stuck = time.Time{}
		}
		if slot < 0 {
			if try {
				return nil, le, nil, nil
			}
			if len(ahead) >= n && ws.ahead == "" {
				ws.ahead = ahead[len(ahead)-n].HolderFile
			}
			if !q.enqueued {
				if err := l.enqueue(ctx, b, q, m); err != nil {
					return nil, nil, nil, err
				}
			}
			return nil, le, ws, nil
		}
		key := slotKey(name, slot)
		if taken == nil {
			cmp = append(cmp, lockstore.Absent(key))
			ops = append(ops, lockstore.PutLeased(key, m.encode(), m.Lease))
		} else {
			// The takeover: delete the dead holder's key and create it
			// anew, so that its create revision, the new token, is this
			// transaction's revision; only if the key is still at the
			// revision judged dead.
			cmp = append(cmp, lockstore.ModRevIs(key, taken.ModRev))
			ops = append(ops, lockstore.Delete(key), lockstore.PutLeased(key, m.encode(), m.Lease))
		}
		if q.enqueued {
			ops = append(ops, lockstore.Delete(q.key))
		}
		res, err := b.Txn(ctx, lockstore.Txn{If: cmp, Then: ops})
		if err != nil {
			return nil, nil, nil, err
		}
		if !res.Succeeded {
			continue // another process changed the lock: read again
		}
		q.enqueued = false
		if taken != nil && l.seesHolderFile(&taken.Marker) {
			l.removeHolderFile(taken.HolderFile)
		}
		return &Holder{l: l, name: name, slot: slot, key: key, token: res.Revision, marker: m}, nil, nil, nil
	}
	return nil, &LockedError{Name: name}, &watchSet{poll: pidPoll}, nil
}

// currentLease returns the lease of this Locker's holders under the Lease
// strategy, granting one when there is none yet or the last one ended.
// One lease serves every holder of the Locker, as one pid serves every
// holder of a process: they live and die together.
func (l *Locker) currentLease(ctx context.Context) (lockstore.Lease, error) {
	l.leaseMu.Lock()
	defer l.leaseMu.Unlock()
	if l.lease != nil {
		select {
		case <-l.lease.Done():
		default:
			return l.lease, nil
		}
	}
	lease, err := l.b.(lockstore.Leaser).Grant(ctx)
	if err != nil {
		return nil, err
	}
	l.lease = lease
	return lease, nil
}

// maxRenewals bounds the new leases one acquire takes when it finds its
// lease ended.
const maxRenewals = 3

// renewLease replaces old, which ended, with a new lease (unless another
// acquire replaced it already).
func (l *Locker) renewLease(ctx context.Context, old lockstore.Lease) (lockstore.Lease, error) {
	l.leaseMu.Lock()
	if l.lease == old {
		l.lease = nil
	}
	l.leaseMu.Unlock()
	return l.currentLease(ctx)
}

// Close ends what the Locker holds of its own: under the Lease strategy
// it revokes the holders' lease, which deletes the keys of every holder
// it still has (each Holder then reports Lost). Holders should be
// released first. A Locker on the kv store holds nothing: Close does
// nothing there.
func (l *Locker) Close() error {
	l.leaseMu.Lock()
	lease := l.lease
	l.lease = nil
	l.leaseMu.Unlock()
	if lease == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return lease.Revoke(ctx)
}

// removeHolderFile unlinks a holder file that no process holds.
func (l *Locker) removeHolderFile(base string) bool {
	path := filepath.Join(l.holderDir, base)
	f, ok := takeHolderFile(path)
	if !ok {
		return false
	}
	// Unlinked while locked, so that no holder can be between creating
	// and locking it (holders lock under a temporary name).
	os.Remove(path)
	f.Close()
	return true
}

// slotState is a slot key (or a waiter's key) and its decoded marker.
type slotState struct {
	Info
	ModRev int64
}

type lockState struct {
	n        int // the slot count recorded, 0 if none or unreadable
	slotsRev int64
	slots    map[int]*slotState
	waiters  []*slotState // in queue order: by create revision
}

func parseLock(name string, kvs []lockstore.KeyValue) lockState {
	st := lockState{slots: map[int]*slotState{}}
	for _, e := range kvs {
		if e.Key == slotsKey(name) {
			st.slotsRev = e.ModRev
			st.n, _ = strconv.Atoi(string(e.Value))
			continue
		}
		if strings.HasPrefix(e.Key, waitPrefix(name)) {
			st.waiters = append(st.waiters, newSlotState(name, -1, e))
			continue
		}
		nm, slot, ok := parseSlotKey(e.Key)
		if !ok || nm != name {
			continue
		}
		st.slots[slot] = newSlotState(nm, slot, e)
	}
	slices.SortFunc(st.waiters, func(a, b *slotState) int { return cmp.Compare(a.Token, b.Token) })
	return st
}

func newSlotState(name string, slot int, e lockstore.KeyValue) *slotState {
	m, err := decodeMarker(e.Value)
	s := &slotState{Info: Info{Marker: m, Name: name, Slot: slot, Key: e.Key, Token: e.CreateRev}, ModRev: e.ModRev}
	if err != nil {
		// An unreadable marker has no pid, host or time: only time-based
		// judges can take it over, from its zero time.
		s.Reason = "unreadable marker"
	}
	return s
}

// maxWait bounds a wait for events before the lock is read again, in
// case an event was missed (a file system without inotify, a holder on
// another host).
const maxWait = 2 * time.Second

// aheadWait bounds the wait of a waiter queued behind another, whose
// file reports every move: a long queue takes longer than maxWait to
// reach its tail, and a look at the lock costs a store open.
const aheadWait = 10 * time.Second

// pidPoll is how often a holder judged by its pid alone is looked at
// again: a process's death gives no event to a stranger.
const pidPoll = 100 * time.Millisecond

// waitChange waits until the lock may have become free or the waiter
// ahead moved on: a watched holder file was closed, unlinked or marked
// (its holder died, released, or stopped waiting), the store changed
// (when there are no files to watch), a holder's stale time came, or
// the poll bound passed.
func (l *Locker) waitChange(ctx context.Context, name string, le *LockedError, ws *watchSet) error {
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	woke := make(chan struct{}, 2)
	timeout := maxWait
	if ws.poll > 0 {
		timeout = ws.poll
	}
	files := ws.holders
	if ws.ahead != "" {
		// Queued behind another waiter: its file is all there is to
		// watch; the holders are its business until it moves on.
		files = []string{ws.ahead}
		if ws.poll == 0 {
			timeout = aheadWait
		}
	}
	evented := len(files) > 0
	w, err := newWatcher()
	if err != nil {
		evented = false
	} else {
		defer w.close()
		for _, f := range files {
			p := filepath.Join(l.holderDir, f)
			if w.watchFile(p) != nil {
				return nil // gone since the attempt: look again
			}
			// What happened between the attempt's look and the watch
			// gave its event to no one: look at the file once more.
			if f == ws.ahead {
				if fi, err := os.Stat(p); err != nil || fi.ModTime().Equal(movedOn) {
					return nil
				}
			}
			if v, _ := probeHolderFile(p); v != alive {
				return nil
			}
		}
		go func() {
			if w.wait(ctx2) {
				woke <- struct{}{}
			}
		}()
	}
	if !evented {
		go func() {
			if l.b.Wait(ctx2, namePrefix(name), ws.rev) == nil {
				woke <- struct{}{}
			}
		}()
	}
	if !ws.stale.IsZero() {
		timeout = min(timeout, time.Until(ws.stale)+time.Millisecond)
	}
	t := time.NewTimer(max(timeout, time.Millisecond))
	defer t.Stop()
	select {
	case <-woke:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// List returns the holders of every lock, each judged as an acquirer
// with this Locker's options would judge it.
func (l *Locker) List(ctx context.Context) ([]Info, error) {
	kvs, _, err := l.b.Range(ctx, KeyPrefix)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Info
	for _, e := range kvs {
		name, slot, ok := parseSlotKey(e.Key)
		if !ok {
			continue
		}
		s := newSlotState(name, slot, e)
		s.Alive, s.Reason = l.judge(&s.Marker, now)
		out = append(out, s.Info)
	}
	return out, nil
}

// Fenced returns a writer whose writes commit only while token is the
// token of a holder of lock name, checked in the same atomic step as
// the write; otherwise they fail with a *FencedError (ErrFenced, and
// kv.ErrFenced) and write nothing.
func (l *Locker) Fenced(name string, token int64) *FencedWriter {
	return &FencedWriter{l: l, name: name, token: token}
}

// FencedWriter writes under a lock's fencing token.
type FencedWriter struct {
	l     *Locker
	name  string
	token int64
	key   string // the slot key, once found
}

// Txn commits t under the fence.
func (fw *FencedWriter) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	if fw.key == "" {
		if err := CheckName(fw.name); err != nil {
			return lockstore.TxnResult{}, err
		}
		kvs, _, err := fw.l.b.Range(ctx, slotPrefix(fw.name))
		if err != nil {
			return lockstore.TxnResult{}, err
		}
		for _, e := range kvs {
			if e.CreateRev == fw.token {
				fw.key = e.Key
			}
		}
		if fw.key == "" {
			return lockstore.TxnResult{}, &FencedError{Name: fw.name, Token: fw.token}
		}
	}
	t.Fence = &lockstore.Fence{Key: fw.key, Token: fw.token}
	res, err := fw.l.b.Txn(ctx, t)
	if errors.Is(err, lockstore.ErrFenced) {
		return res, &FencedError{Name: fw.name, Token: fw.token, Err: err}
	}
	return res, err
}

// Put sets key to value under the fence.
func (fw *FencedWriter) Put(ctx context.Context, key string, value []byte) (int64, error) {
	res, err := fw.Txn(ctx, lockstore.Txn{Then: []lockstore.Op{lockstore.Put(key, value)}})
	return res.Revision, err
}

// Delete removes key under the fence.
func (fw *FencedWriter) Delete(ctx context.Context, key string) (int64, error) {
	res, err := fw.Txn(ctx, lockstore.Txn{Then: []lockstore.Op{lockstore.Delete(key)}})
	return res.Revision, err
}
