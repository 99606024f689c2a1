package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"sync"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// WatchDir yields the changes to keys under prefix that the writer of the
// store in dir commits, from revision from on (0: the next to commit),
// as Store.Watch does for a store's own writes; it is the watch of a
// process beside the writer. It takes no lock and writes nothing: it
// reads the snapshot once, keeping the keys under prefix, then follows
// the log segments as the writer appends, and yields a change once it is
// durable (a later record of the log claims it synced; the writer marks
// its log a millisecond after it goes idle). It wakes on the directory's
// changes (inotify on Linux), not by polling.
//
// It goes on across the writer's checkpoints and restarts, and while no
// writer runs: it opens each new segment as it appears, and an open
// segment stays readable after a checkpoint deletes it. A writer's
// checkpoint keeps the newest Options.LogRetention bytes (4 MiB unless
// set) of the log it covers, so a watch that has read to within that of
// the writer's position when it checkpoints goes on past it, however
// many segments that is. A from older than the snapshot's revision ends
// the watch with a *CompactedError (matching ErrCompacted) naming the
// oldest revision it can start from, and so does a watch that fell
// behind: one more than the retention and 16 open segments behind (each
// segment opened ahead holds its disk space until read), or one that a
// checkpoint outran. Damage that is not the writer's appending ends
// it with the reader's error. opts may be nil; its FS and maximum sizes
// are used.
func WatchDir(ctx context.Context, dir string, opts *Options, prefix []byte, from Revision, wopts ...WatchOption) iter.Seq2[Event, error] {
	var cfg watchConfig
	for _, o := range wopts {
		o(&cfg)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	return watchDir(ctx, dir, &o, bytes.Clone(prefix), from, cfg)
}

func watchDir(ctx context.Context, dir string, o *Options, prefix []byte, from Revision, cfg watchConfig) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		fsys := o.fs()
		// The watch begins before the first read, so that a change made
		// after the read wakes the loop.
		dw, err := vfs.WatchDir(fsys, dir)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer dw.Close()
		f := &follower{fsys: fsys, dir: dir, prefix: prefix, prev: cfg.prev,
			maxRec: o.walOptions().MaxRecordSize, state: map[string]*record.Entry{}}
		f.vouched = vouchIfNoWriter(fsys, dir, f.maxRec)
		defer f.close()
		if err := f.start(from); err != nil {
			yield(Event{}, err)
			return
		}
		// The opener opens each new segment as soon as it appears, however
		// slowly the loop's body reads, so that a checkpoint that deletes
		// it does not take it away (up to maxAhead segments ahead).
		wake := make(chan struct{}, 1)
		octx, stop := context.WithCancel(ctx)
		opened := make(chan struct{})
		go func() {
			defer close(opened)
			for dw.Wait(octx) == nil {
				f.mu.Lock()
				f.openNew(false)
				f.mu.Unlock()
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}()
		defer func() { stop(); <-opened }()
		stopped := false
		emit := func(ev Event) bool {
			if !yield(ev, nil) {
				stopped = true
				return false
			}
			return true
		}
		for {
			if err := f.advance(emit); err != nil {
				if !stopped {
					yield(Event{}, err)
				}
				return
			}
			select {
			case <-wake:
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			}
		}
	}
}

// follower follows a store's files: the keys under prefix at revision
// rev, and the segments it reads next, opened ahead of time so that a
// checkpoint's deletion does not take them away.
type follower struct {
	fsys   vfs.FS
	dir    string
	prefix []byte
	prev   bool
	maxRec int

	state    map[string]*record.Entry // the keys under prefix, at rev
	rev      Revision
	emitFrom Revision // changes before it are applied, not yielded
	snapRev  Revision // the revision of the snapshot loaded

	// The segments opened and not yet read to their end, and what the
	// opener found: mu guards them once the opener runs.
	mu    sync.Mutex
	tails []*wal.Tail
	last  wal.SegmentNum // the newest segment opened
	err   error          // the opener's error, returned once tails are read
	// vouched holds, for a watch that started with no live writer, the
	// offsets up to which it made the newest segments durable itself: a
	// killed writer's last records, which no record claims synced.
	vouched map[wal.SegmentNum]int64
}

// vouchIfNoWriter vouches for a dead writer's last records, as a
// read-only open does, when no writer holds dir: it takes the lock
// shared only when the log ends in records no writer claimed synced, for
// as long as vouching takes. With a live writer, or no LOCK (a shared
// lock would create it), it does nothing: the writer marks its records.
func vouchIfNoWriter(fsys vfs.FS, dir string, maxRec int) map[wal.SegmentNum]int64 {
	v, _ := recovery.VouchTail(fsys, dir, maxRec, func() (func(), error) {
		return lockShared(fsys, path.Join(dir, LockName))
	})
	return v
}

// maxAhead bounds the segments a watch keeps open ahead of its reading
// (each keeps a deleted segment's disk space until it is read): a watch
// further behind falls behind a checkpoint.
const maxAhead = 16

// errStopWatch stops a segment's read when the loop's body breaks.
var errStopWatch = errors.New("kv: watch stopped")

func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tails {
		t.Close()
	}
	f.tails = nil
}

// start loads the snapshot and opens the segments after it. A checkpoint
// that replaces the snapshot and deletes segments between the two is
// met by starting again.
func (f *follower) start(from Revision) error {
	var err error
	for range 10 {
		if err = f.load(); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		f.close()
	}
	if err != nil {
		return err
	}
	if from != 0 && from <= f.snapRev {
		return &CompactedError{Requested: from, Oldest: f.snapRev + 1}
	}
	if from != 0 {
		f.emitFrom = from
		return nil
	}
	// From now: what is durable already is applied, not yielded.
	f.emitFrom = ^Revision(0)
	if err := f.advance(func(Event) bool { return true }); err != nil {
		return err
	}
	f.emitFrom = f.rev + 1
	return nil
}

// load reads the snapshot, keeping the keys under prefix, and opens every
// segment after the one it covers.
func (f *follower) load() error {
	f.state = map[string]*record.Entry{}
	var meta snapshot.Meta
	err := image.ReadAny(f.fsys, path.Join(f.dir, snapshot.Name), func(m snapshot.Meta) error {
		meta = m
		return nil
	}, nil, func(e *record.Entry) error {
		if bytes.HasPrefix(e.Key, f.prefix) {
			c := *e
			c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
			f.state[string(c.Key)] = &c
		}
		return nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No snapshot: the log from segment 1 holds everything.
		if segs, lerr := wal.ListSegments(f.fsys, f.dir); lerr != nil {
			return lerr
		} else if len(segs) > 0 && segs[0] != 1 {
			return fmt.Errorf("kv: watch %s: no snapshot, and the log starts at segment %s: %w", f.dir, segs[0], fs.ErrNotExist)
		}
	case err != nil:
		return err
	}
	f.rev, f.snapRev = meta.Revision, meta.Revision
	f.last = meta.Covered
	return f.openNew(true)
}

// openNew opens the segments created since the last look. With first set,
// the segment after the last one opened must be there: the snapshot
// covering a segment implies the next exists.
func (f *follower) openNew(first bool) error {
	if f.err != nil {
		return f.err
	}
	err := f.openSegments(first)
	if !first && err != nil {
		f.err = err
	}
	return err
}

func (f *follower) openSegments(first bool) error {
	segs, err := wal.ListSegments(f.fsys, f.dir)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if s <= f.last {
			continue
		}
		if len(f.tails) >= maxAhead {
			break
		}
		if s != f.last+1 {
			// A gap: a checkpoint deleted segments this watch never
			// opened.
			return f.fellBehind(first)
		}
		t, err := wal.OpenTail(f.fsys, f.dir, s, f.maxRec)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			break // being created: the next look opens it
		}
		if errors.Is(err, fs.ErrNotExist) {
			return f.fellBehind(first)
		}
		if err != nil {
			return err
		}
		if v, ok := f.vouched[s]; ok {
			t.Vouch(v)
		}
		f.tails = append(f.tails, t)
		f.last = s
	}
	if first && len(f.tails) == 0 && f.last > 0 {
		return fmt.Errorf("kv: watch %s: segment %s after the snapshot is missing: %w", f.dir, f.last+1, fs.ErrNotExist)
	}
	return nil
}

// errGap is what the opener finds when a checkpoint deleted segments
// the watch never opened; the loop turns it into a CompactedError once it
// has read what it did open.
var errGap = errors.New("kv: watch: segments deleted before they were opened")

// fellBehind is the error of a watch whose next segment a checkpoint
// deleted: when starting, fs.ErrNotExist, which start meets by loading
// the new snapshot; later, errGap.
func (f *follower) fellBehind(first bool) error {
	if first {
		return fmt.Errorf("kv: watch %s: segment %s deleted while opening: %w", f.dir, f.last+1, fs.ErrNotExist)
	}
	return errGap
}

// compacted is the CompactedError of a watch at f.rev that fell behind.
func (f *follower) compacted() error {
	oldest := f.rev + 1
	if m, err := image.ReadAnyMeta(f.fsys, path.Join(f.dir, snapshot.Name)); err == nil {
		oldest = m.Revision + 1
	}
	return &CompactedError{Requested: f.rev + 1, Oldest: oldest}
}

// advance reads what the writer made durable since the last call,
// applies it, and yields the changes from emitFrom on.
func (f *follower) advance(emit func(Event) bool) error {
	var rec record.Record
	apply := func(r wal.Record) error {
		if err := record.DecodeInto(r.Payload, &rec); err != nil {
			return fmt.Errorf("kv: watch: %s at offset %d: %w", wal.SegmentPath(f.dir, r.Segment), r.Offset, err)
		}
		if rec.Revision <= f.rev {
			return nil // replayed already
		}
		if !f.applyRecord(&rec, emit) {
			return errStopWatch
		}
		return nil
	}
	for {
		f.mu.Lock()
		oerr := f.openNew(false)
		if len(f.tails) == 0 {
			f.mu.Unlock()
			if errors.Is(oerr, errGap) {
				return f.compacted()
			}
			return oerr
		}
		// After the opener found a later segment (oerr says it went on
		// past a gap), this one has a successor too.
		t, nextExists := f.tails[0], len(f.tails) > 1 || oerr != nil
		f.mu.Unlock()
		// The records are read and yielded without the lock: the opener
		// goes on opening meanwhile.
		if err := t.Next(nextExists, apply); err != nil {
			return err
		}
		if !t.Done() {
			if errors.Is(oerr, errGap) {
				return f.compacted()
			}
			return oerr
		}
		t.Close()
		f.mu.Lock()
		f.tails = f.tails[1:]
		f.mu.Unlock()
	}
}

// applyRecord applies one record to the state and yields its changes; it
// returns false when the loop's body broke.
func (f *follower) applyRecord(rec *record.Record, emit func(Event) bool) bool {
	rev := rec.Revision
	f.rev = rev
	for i := range rec.Ops {
		op := &rec.Ops[i]
		if !bytes.HasPrefix(op.Key, f.prefix) {
			continue
		}
		old := f.state[string(op.Key)]
		var ev Event
		if op.Kind == record.KindDelete {
			if old == nil {
				continue
			}
			delete(f.state, string(op.Key))
			ev = Event{Type: EventDelete, Entry: Entry{Key: old.Key, ModRev: rev}}
		} else {
			e := new(record.Entry)
			if _, _, err := record.NextInto(e, nil, old, op, rev); err != nil {
				// The writer logs only operations that succeeded: an add
				// it logged applies.
				continue
			}
			f.state[string(e.Key)] = e
			ev = Event{Type: EventPut, Entry: *e}
		}
		if f.prev && old != nil {
			p := *old
			ev.Prev = &p
		}
		if rev >= f.emitFrom && !emit(ev) {
			return false
		}
	}
	return true
}
