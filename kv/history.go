package kv

import (
	"sync"

	"github.com/kvstore/kv/record"
)

// history is the watch history: the changes of the last revisions, in
// revision order, as the committer made them, bounded in bytes. The
// committer adds a group's changes when it makes them visible and
// publishes them once they are durable; watchers read what is published.
// Eviction takes whole revisions from the front, so that a revision is
// either held entirely or not at all.
//
// Its memory is its own: keys and values are copied into chunks of its
// own, never the map's, so that it pins none of the map's arena. An
// event a watcher holds keeps its chunk alive, as an Entry does.
type history struct {
	mu sync.Mutex
	// event i has the absolute index base+i; an absolute index stays a
	// watcher's position across evictions.
	events eventRing
	base   uint64
	// compacted is the newest revision no longer held (or never held:
	// everything up to the revision at open): a watch from it or before
	// it is refused.
	compacted Revision
	// durable is the newest published revision: watchers see events up
	// to it.
	durable Revision
	bytes   int64 // the held events' accounted size
	limit   int64 // evict down to it
	chunk   []byte
	// wake is closed, and replaced, when events are published or the
	// history ends.
	wake chan struct{}
	// end, once set, ends every watch when it has read what was
	// published: ErrClosed, or the store's fail-stop.
	end error
	// watchers are the positions of the watches reading the history,
	// for Stats' watch lag; fellBehind counts the watches it ended with
	// a CompactedError.
	watchers   map[*watchPos]struct{}
	fellBehind int64
}

// histEvent is one change in the history.
type histEvent struct {
	typ   EventType
	entry record.Entry // after; for a delete: Key and ModRev
	prev  record.Entry // before; Key nil when the key was absent
}

// eventOverhead is what a held event costs beside its bytes.
const eventOverhead = 96

// histChunk is the size of the chunks the history copies bytes into.
const histChunk = 64 << 10

func newHistory(rev Revision, limit int64) *history {
	return &history{compacted: rev, durable: rev, limit: limit, wake: make(chan struct{}), watchers: make(map[*watchPos]struct{})}
}

// copyBytes copies b into the history's chunks.
func (h *history) copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > histChunk/4 {
		return append([]byte(nil), b...)
	}
	if cap(h.chunk)-len(h.chunk) < len(b) {
		h.chunk = make([]byte, 0, histChunk)
	}
	l := len(h.chunk)
	h.chunk = append(h.chunk, b...)
	return h.chunk[l:len(h.chunk):len(h.chunk)]
}

// add appends a group's changes, unpublished. Called by the committer
// only, before the changes are applied to the map: the entries they
// point to are the group's or the map's.
func (h *history) add(changes []staged) {
	if len(changes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range changes {
		ch := &changes[i]
		var ev histEvent
		if ch.e == nil {
			if ch.prev == nil {
				continue // a delete of an absent key changes nothing
			}
			ev.typ = EventDelete
			ev.entry = record.Entry{Key: h.copyBytes([]byte(ch.key)), ModRev: ch.rev}
		} else {
			ev.typ = EventPut
			ev.entry = *ch.e
			ev.entry.Key = h.copyBytes(ch.e.Key)
			ev.entry.Value = h.copyBytes(ch.e.Value)
		}
		if ch.prev != nil {
			ev.prev = *ch.prev
			ev.prev.Key = ev.entry.Key
			ev.prev.Value = h.copyBytes(ch.prev.Value)
		}
		h.events.push(ev)
		h.bytes += int64(len(ev.entry.Key)+len(ev.entry.Value)+len(ev.prev.Value)) + eventOverhead
	}
	h.evict()
}

// publish makes the events up to rev visible to watchers.
func (h *history) publish(rev Revision) {
	h.mu.Lock()
	if rev > h.durable && h.end == nil {
		h.durable = rev
		close(h.wake)
		h.wake = make(chan struct{})
	}
	h.mu.Unlock()
}

// evict drops the oldest revisions while over the limit, but never one
// that is not yet published (the limit bounds what watchers can be
// behind by, not what the committer has in flight).
func (h *history) evict() {
	drop := 0
	for h.bytes > h.limit && drop < h.events.len() {
		rev := h.events.at(drop).entry.ModRev
		if rev > h.durable {
			break
		}
		for drop < h.events.len() && h.events.at(drop).entry.ModRev == rev {
			ev := h.events.at(drop)
			h.bytes -= int64(len(ev.entry.Key)+len(ev.entry.Value)+len(ev.prev.Value)) + eventOverhead
			drop++
		}
		h.compacted = rev
	}
	if drop == 0 {
		return
	}
	h.base += uint64(drop)
	h.events.drop(drop)
}

// pinned reports whether changes not yet published hold the history
// over its limit: evict keeps them, so only a sync that publishes them
// lets it shrink.
func (h *history) pinned() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes > h.limit
}

// finish publishes nothing more: every watch ends with err once it has
// read what was published. The first call wins.
func (h *history) finish(err error) {
	h.mu.Lock()
	if h.end == nil {
		h.end = err
		close(h.wake)
		h.wake = make(chan struct{})
	}
	h.mu.Unlock()
}

// watchStats is what Stats reports of the history and its watchers.
type watchStats struct {
	watchers   int
	lag        Revision // the slowest watcher's distance behind durable
	fellBehind int64
	bytes      int64
	oldest     Revision // the oldest revision a watch can start from
}

func (h *history) stats() watchStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := watchStats{watchers: len(h.watchers), fellBehind: h.fellBehind, bytes: h.bytes, oldest: h.compacted + 1}
	for pos := range h.watchers {
		// pos.next is the revision the watcher needs next: it has
		// everything before it.
		if pos.next <= h.durable {
			st.lag = max(st.lag, h.durable-pos.next+1)
		}
	}
	return st
}

// join counts pos among the watchers until leave.
func (h *history) join(pos *watchPos) {
	h.mu.Lock()
	h.watchers[pos] = struct{}{}
	h.mu.Unlock()
}

func (h *history) leave(pos *watchPos) {
	h.mu.Lock()
	delete(h.watchers, pos)
	h.mu.Unlock()
}
