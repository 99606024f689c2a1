package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
)

// EventType says what a change did to its key.
type EventType uint8

// The event types.
const (
	// EventPut is a put or an add: the key has a new value.
	EventPut EventType = iota + 1
	// EventDelete is the delete of a key that existed.
	EventDelete
)

// String names the type, as the CLI prints it.
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return fmt.Sprintf("EventType(%d)", t)
}

// Event is one committed change of one key. A transaction that changes
// several keys (or one key several times) gives one event per operation,
// in the transaction's order, all at its revision. A delete of a key
// that did not exist changes nothing and gives no event.
type Event struct {
	Type EventType
	// Entry is the key's state after the change, as Get would have
	// returned it: for an add, the sum. For a delete only Key and ModRev
	// (the delete's revision) are set.
	Entry Entry
	// Prev is the key's state before the change, when the watch asked
	// for it (WithPrev) and the key existed; nil otherwise.
	Prev *Entry
}

// Revision returns the revision of the change.
func (e Event) Revision() Revision { return e.Entry.ModRev }

// ErrCompacted is matched by the error of a watch that asks for, or falls
// behind to, a revision the store no longer holds (see CompactedError).
var ErrCompacted = errors.New("kv: revision compacted")

// CompactedError is the error of a watch from a revision the store no
// longer holds the changes of: one older than its watch history (see
// Options.WatchHistoryBytes), or than its open, or one the watch fell
// behind to because it read slower than the store wrote. Oldest is the
// oldest revision a new watch can start from: read the state with Scan
// and watch from the revision the Scan saw, plus one.
type CompactedError struct {
	Requested Revision // the revision the watch needed next
	Oldest    Revision // the oldest revision a watch can start from now
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("kv: watch from revision %d: compacted; the oldest revision held is %d", e.Requested, e.Oldest)
}

// Is makes a CompactedError match ErrCompacted.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// WatchOption configures a watch.
type WatchOption func(*watchConfig)

type watchConfig struct {
	prev bool
}

// WithPrev fills Event.Prev with the key's state before each change.
func WithPrev() WatchOption { return func(c *watchConfig) { c.prev = true } }

// watchBatch is how many events a watcher copies under the history's lock.
const watchBatch = 256

// Watch yields every committed change to a key under prefix (every key,
// for an empty prefix) at revision from or later, in revision order,
// each once, none left out, and each only once it is durable: under
// Always as soon as its write is acknowledged; under Interval and Never
// once a sync has made it durable (Sync, the interval's sync, a
// checkpoint, Close). A from of 0 means the next revision to commit.
//
// The loop waits for changes. It ends when the loop body breaks, or with
// a final error: ctx's error when ctx ends, ErrClosed after Close (once
// every change made durable before it has been yielded), an error
// matching ErrFailed when the store fail-stops, and a *CompactedError
// (matching ErrCompacted) when from is older than the store's watch
// history, or when the loop fell so far behind that the history let go
// of the changes it had yet to yield. The history holds the latest
// changes since the store was opened, up to Options.WatchHistoryBytes;
// a watcher never holds up a writer.
//
//	for ev, err := range s.Watch(ctx, []byte("locks/"), rev+1) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(ev.Type, string(ev.Entry.Key), ev.Revision())
//	}
//
// Event entries share memory with the history, as Get's do with the map:
// don't modify them.
//
// A store opened ReadOnly watches its directory instead, as WatchDir
// does: the changes of the writer in another process that has it open.
func (s *Store) Watch(ctx context.Context, prefix []byte, from Revision, opts ...WatchOption) iter.Seq2[Event, error] {
	var cfg watchConfig
	for _, o := range opts {
		o(&cfg)
	}
	prefix = bytes.Clone(prefix)
	if s.opts.ReadOnly {
		o := s.opts
		return watchDir(ctx, s.dir, &o, prefix, from, cfg)
	}
	return func(yield func(Event, error) bool) {
		// A closed store's history is finished with ErrClosed: a watch
		// that starts after Close still yields what was durable before
		// it, then ErrClosed, as one that started before Close does.
		h := s.hist
		pos, err := h.start(from)
		if err != nil {
			yield(Event{}, err)
			return
		}
		h.join(&pos)
		defer h.leave(&pos)
		var batch []histEvent
		for {
			var wake <-chan struct{}
			batch, wake, err = h.read(&pos, batch[:0])
			for i := range batch {
				ev := &batch[i]
				// A watch from a revision not yet committed reads the
				// history from its end: what commits before from is
				// not its to yield.
				if ev.entry.ModRev < from || !bytes.HasPrefix(ev.entry.Key, prefix) {
					continue
				}
				if !yield(ev.event(cfg.prev), nil) {
					return
				}
			}
			if err != nil {
				yield(Event{}, err)
				return
			}
			if len(batch) > 0 {
				continue
			}
			select {
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			case <-wake:
			}
		}
	}
}

// event returns the Event of a history entry.
func (ev *histEvent) event(prev bool) Event {
	out := Event{Type: ev.typ, Entry: ev.entry}
	if prev && ev.prev.Key != nil {
		p := ev.prev
		out.Prev = &p
	}
	return out
}

// watchPos is a watcher's place in the history: the absolute index of
// the next event to read, and the revision it needs next.
type watchPos struct {
	index uint64
	next  Revision
}

// start places a watch from revision from (0: the next to commit).
func (h *history) start(from Revision) (watchPos, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if from == 0 {
		from = h.durable + 1
	}
	if from <= h.compacted {
		return watchPos{}, &CompactedError{Requested: from, Oldest: h.compacted + 1}
	}
	i := h.events.search(func(ev *histEvent) bool { return ev.entry.ModRev >= from })
	return watchPos{index: h.base + uint64(i), next: from}, nil
}

// read appends to batch the published events at pos and after (up to
// watchBatch) and moves pos past them. It returns the channel that is
// closed when more are published, or the error that ends the watch
// once every published event is read: the history's end, or the
// compaction of the events at pos.
func (h *history) read(pos *watchPos, batch []histEvent) ([]histEvent, <-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pos.index < h.base {
		h.fellBehind++
		return batch, nil, &CompactedError{Requested: pos.next, Oldest: h.compacted + 1}
	}
	i := int(pos.index - h.base)
	for ; i < h.events.len() && len(batch) < watchBatch; i++ {
		ev := h.events.at(i)
		if ev.entry.ModRev > h.durable {
			break
		}
		batch = append(batch, *ev)
	}
	pos.index = h.base + uint64(i)
	if n := len(batch); n > 0 {
		// The revision needed next: the last one read, if the batch
		// ended inside it.
		last := batch[n-1].entry.ModRev
		pos.next = last + 1
		if i < h.events.len() && h.events.at(i).entry.ModRev == last {
			pos.next = last
		}
	}
	if len(batch) == 0 && h.end != nil {
		return batch, nil, h.end
	}
	return batch, h.wake, nil
}
