package kvapitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// watcher runs a watch on a goroutine and hands its events over.
type watcher struct {
	s      *suite
	events chan kv.Event
	end    chan error
	cancel context.CancelFunc
}

// watch starts a watch of the suite's key p (a prefix), from from.
func (s *suite) watch(prefix []byte, from kv.Revision, o *kvapi.WatchOptions) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{s: s, events: make(chan kv.Event, 10000), end: make(chan error, 1), cancel: cancel}
	// Watch is called here, before the caller's next write; only the
	// loop runs on a goroutine of its own.
	seq := s.db.Watch(ctx, prefix, from, o)
	go func() {
		for ev, err := range seq {
			if err != nil {
				w.end <- err
				return
			}
			w.events <- ev
		}
		w.end <- nil
	}()
	s.t.Cleanup(cancel)
	return w
}

// next returns the watch's next event, or its final error (a nil error
// for a loop that ended without one, which no watch may do).
func (w *watcher) next() (kv.Event, error, bool) {
	w.s.t.Helper()
	select {
	case ev := <-w.events:
		return ev, nil, true
	case err := <-w.end:
		if err == nil {
			err = errors.New("the watch ended without an error")
		}
		return kv.Event{}, err, false
	case <-time.After(callTimeout):
		w.s.t.Fatalf("no event and no end of the watch after %v", callTimeout)
		return kv.Event{}, nil, false
	}
}

// until returns the events up to, not including, the first of key
// marker; it fails the test when the watch ends first.
func (w *watcher) until(marker []byte) []kv.Event {
	w.s.t.Helper()
	var out []kv.Event
	for {
		ev, err, ok := w.next()
		if !ok {
			w.s.t.Fatalf("the watch ended after %d events, before the marker %q: %v", len(out), marker, err)
		}
		if bytes.Equal(ev.Entry.Key, marker) {
			return out
		}
		out = append(out, ev)
	}
}

// ended waits for the watch's final error.
func (w *watcher) ended() error {
	w.s.t.Helper()
	for {
		ev, err, ok := w.next()
		if !ok {
			return err
		}
		w.s.t.Errorf("event %s after the watch should have ended", evString(ev))
	}
}

// quiet checks that no event comes and the watch goes on for a moment.
func (w *watcher) quiet(what string) {
	w.s.t.Helper()
	select {
	case ev := <-w.events:
		w.s.t.Errorf("%s: unexpected event %s", what, evString(ev))
	case err := <-w.end:
		w.s.t.Errorf("%s: the watch ended: %v", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

// evString prints an event as the checks compare them.
func evString(ev kv.Event) string {
	e := ev.Entry
	s := fmt.Sprintf("%v %q", ev.Type, e.Key)
	if ev.Type == kv.EventPut {
		s += fmt.Sprintf("=%q create %d version %d", e.Value, e.CreateRev, e.Version)
	}
	s += fmt.Sprintf(" @%d", e.ModRev)
	if p := ev.Prev; p != nil {
		s += fmt.Sprintf(" prev %q create %d mod %d version %d", p.Value, p.CreateRev, p.ModRev, p.Version)
	}
	return s
}

func evStrings(evs []kv.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString("\n\t" + evString(ev))
	}
	return b.String()
}

// want is an expected event: type, key (under the suite's prefix) and
// value.
type want struct {
	typ   kv.EventType
	key   string
	value string
}

func (w want) String() string {
	if w.typ == kv.EventDelete {
		return fmt.Sprintf("delete %q", w.key)
	}
	return fmt.Sprintf("put %q=%q", w.key, w.value)
}

// replay checks each event against the state of its key that the
// events before it left (nil: absent) — Prev when asked for, CreateRev,
// Version — and applies it.
func (s *suite) replay(state map[string]*kv.Entry, ev kv.Event, prev bool) {
	s.t.Helper()
	k := string(ev.Entry.Key)
	old := state[k]
	if prev {
		switch {
		case old == nil && ev.Prev != nil:
			s.t.Errorf("%s: Prev set, but the key was absent", evString(ev))
		case old != nil && ev.Prev == nil:
			s.t.Errorf("%s: no Prev, but the key held %q", evString(ev), old.Value)
		case old != nil && !sameEntry(*old, *ev.Prev):
			s.t.Errorf("%s: Prev is not the key's state before, %+v", evString(ev), *old)
		}
	} else if ev.Prev != nil {
		s.t.Errorf("%s: Prev set, but not asked for", evString(ev))
	}
	switch ev.Type {
	case kv.EventPut:
		create, version := ev.Entry.ModRev, int64(1)
		if old != nil {
			create, version = old.CreateRev, old.Version+1
		}
		if ev.Entry.CreateRev != create || ev.Entry.Version != version {
			s.t.Errorf("%s: want create %d version %d", evString(ev), create, version)
		}
		e := ev.Entry
		state[k] = &e
	case kv.EventDelete:
		if old == nil {
			s.t.Errorf("%s: the delete of an absent key", evString(ev))
		}
		if e := ev.Entry; len(e.Value) != 0 || e.CreateRev != 0 || e.Version != 0 {
			s.t.Errorf("%s: a delete's entry has only Key and ModRev", evString(ev))
		}
		delete(state, k)
	default:
		s.t.Errorf("%s: unknown event type", evString(ev))
	}
}

func sameEntry(a, b kv.Entry) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.CreateRev == b.CreateRev && a.ModRev == b.ModRev && a.Version == b.Version
}

// checkState checks that the state the events left is what Range reads
// under prefix.
func (s *suite) checkState(state map[string]*kv.Entry, prefix []byte) {
	s.t.Helper()
	end := append(bytes.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	es, _, err := s.db.Range(s.ctx(), prefix, end, 0)
	if err != nil {
		s.t.Fatalf("Range: %v", err)
	}
	n := 0
	for _, e := range es {
		if string(e.Key) == string(s.key("marker")) {
			continue
		}
		n++
		if w := state[string(e.Key)]; w == nil || !sameEntry(*w, e) {
			s.t.Errorf("Range has %q=%q (create %d mod %d version %d); the events left %+v", e.Key, e.Value, e.CreateRev, e.ModRev, e.Version, w)
		}
	}
	if n != len(state) {
		s.t.Errorf("Range has %d keys, the events left %d", n, len(state))
	}
}

// testWatchOrder: writers commit puts, adds, deletes and two-key
// transactions concurrently; the watch yields exactly the committed
// changes: every acknowledged revision's operations, in the
// transaction's order, revisions in order, no revision twice, none that
// no one committed, none left out. Each event agrees with the one
// before it of its key (Prev, CreateRev, Version), and the state the
// events leave is the state Range reads.
func testWatchOrder(s *suite) {
	from := s.rev() + 1
	w := s.watch(s.key(""), from, &kvapi.WatchOptions{Prev: true})
	const writers, each = 4, 12
	var mu sync.Mutex
	committed := map[kv.Revision][]want{}
	commit := func(rev kv.Revision, ws ...want) {
		mu.Lock()
		defer mu.Unlock()
		if committed[rev] != nil {
			s.t.Errorf("revision %d returned to two writes", rev)
		}
		committed[rev] = ws
	}
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := s.ctx()
			own := fmt.Sprintf("w%d", i)
			for j := range each {
				v := fmt.Sprintf("%d.%d", i, j)
				switch j % 4 {
				case 0, 2:
					rev, err := kvapi.Put(ctx, s.db, s.key(own), []byte(v))
					if err != nil {
						s.t.Errorf("Put: %v", err)
						return
					}
					commit(rev, want{kv.EventPut, own, v})
				case 1:
					n, rev, err := kvapi.Add(ctx, s.db, s.key("counter"), int64(i+1))
					if err != nil {
						s.t.Errorf("Add: %v", err)
						return
					}
					commit(rev, want{kv.EventPut, "counter", strconv.FormatInt(n, 10)})
				case 3:
					// A delete of the writer's key, which exists, and a put
					// of a key of its own, in one transaction.
					other := own + "/" + v
					res, err := s.db.Txn(ctx, kv.Txn{Then: []kv.Op{kv.DeleteOp(s.key(own)), kv.PutOp(s.key(other), []byte(v))}})
					if err != nil || !res.Committed {
						s.t.Errorf("Txn: %+v, %v", res, err)
						return
					}
					commit(res.Revision, want{kv.EventDelete, own, ""}, want{kv.EventPut, other, v})
				}
			}
		}()
	}
	wg.Wait()
	last := s.put("marker", "")
	got := w.until(s.key("marker"))
	if s.t.Failed() {
		return
	}
	// Nothing else writes: the revisions committed are every one from
	// from to the marker's.
	for r := from; r < last; r++ {
		if committed[r] == nil {
			s.t.Fatalf("revision %d committed by no writer of the suite: did something else write?", r)
		}
	}
	state := map[string]*kv.Entry{}
	prevRev := kv.Revision(0)
	i := 0
	for r := from; r < last; r++ {
		ws := committed[r]
		for j, wt := range ws {
			if i == len(got) {
				s.t.Fatalf("the events stop before revision %d's %s (of %d operations):%s", r, wt, len(ws), evStrings(got[max(0, i-3):]))
			}
			ev := got[i]
			if ev.Revision() < prevRev {
				s.t.Fatalf("event %d is at revision %d after one at %d: out of order:%s", i, ev.Revision(), prevRev, evStrings(got[max(0, i-3):min(len(got), i+3)]))
			}
			prevRev = ev.Revision()
			key := string(ev.Entry.Key)
			if ev.Revision() != r || ev.Type != wt.typ || key != s.prefix+wt.key || (wt.typ == kv.EventPut && string(ev.Entry.Value) != wt.value) {
				s.t.Fatalf("event %d is %s; want revision %d's operation %d, %s (a change left out, doubled or out of order):%s",
					i, evString(ev), r, j, wt, evStrings(got[max(0, i-3):min(len(got), i+3)]))
			}
			s.replay(state, ev, true)
			i++
		}
	}
	if i != len(got) {
		s.t.Fatalf("%d events past the last revision committed:%s", len(got)-i, evStrings(got[i:]))
	}
	s.checkState(state, s.key(""))
}

// prefixOps is testWatchPrev's workload and the events it must give: a
// put, a put of another prefix, an add, a transaction deleting one key
// and creating another (and deleting an absent key, which gives no
// event), a delete, and a put that creates a deleted key anew.
func testWatchPrev(s *suite) {
	base := s.rev()
	w := s.watch(s.key("w/"), base+1, &kvapi.WatchOptions{Prev: true})
	plain := s.watch(s.key("w/"), base+1, nil)
	r1 := s.put("w/a", "1")
	s.put("x", "outside")
	_, r3, err := kvapi.Add(s.ctx(), s.db, s.key("w/a"), 5)
	if err != nil {
		s.t.Fatal(err)
	}
	r4 := s.txn(kv.Txn{Then: []kv.Op{kv.PutOp(s.key("w/b"), []byte("b")), kv.DeleteOp(s.key("w/a")), kv.DeleteOp(s.key("w/none"))}}).Revision
	r5, err := kvapi.Delete(s.ctx(), s.db, s.key("w/b"))
	if err != nil {
		s.t.Fatal(err)
	}
	r6 := s.put("w/a", "7")
	s.put("w/marker", "")
	a1 := kv.Entry{Key: s.key("w/a"), Value: []byte("1"), CreateRev: r1, ModRev: r1, Version: 1}
	a6 := kv.Entry{Key: s.key("w/a"), Value: []byte("6"), CreateRev: r1, ModRev: r3, Version: 2}
	b := kv.Entry{Key: s.key("w/b"), Value: []byte("b"), CreateRev: r4, ModRev: r4, Version: 1}
	wantEvs := []kv.Event{
		{Type: kv.EventPut, Entry: a1},
		{Type: kv.EventPut, Entry: a6, Prev: &a1},
		{Type: kv.EventPut, Entry: b},
		{Type: kv.EventDelete, Entry: kv.Entry{Key: s.key("w/a"), ModRev: r4}, Prev: &a6},
		{Type: kv.EventDelete, Entry: kv.Entry{Key: s.key("w/b"), ModRev: r5}, Prev: &b},
		{Type: kv.EventPut, Entry: kv.Entry{Key: s.key("w/a"), Value: []byte("7"), CreateRev: r6, ModRev: r6, Version: 1}},
	}
	for _, tc := range []struct {
		name string
		w    *watcher
		prev bool
	}{{"with Prev", w, true}, {"without Prev", plain, false}} {
		got := tc.w.until(s.key("w/marker"))
		var want []kv.Event
		for _, ev := range wantEvs {
			if !tc.prev {
				ev.Prev = nil
			}
			want = append(want, ev)
		}
		if evStrings(got) != evStrings(want) {
			s.t.Errorf("%s: events%s\nwant%s", tc.name, evStrings(got), evStrings(want))
		}
	}
}

// testWatchPrefix: a watch yields the keys that start with its prefix,
// byte for byte, and an empty prefix every key; a watch from a past
// revision replays what it holds; one from a revision not yet committed
// yields nothing before it; one from 0 nothing committed before it
// started.
func testWatchPrefix(s *suite) {
	keys := []string{"p", "p/", "p/a", "p0", "o", "p/b/c", "q/p/", "p\xff"}
	from := s.rev() + 1
	w := s.watch(s.key("p/"), from, nil)
	all := s.watch(nil, from, nil)
	for _, k := range keys {
		s.put(k, k)
	}
	s.put("p/marker", "")
	keysOf := func(evs []kv.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, strings.TrimPrefix(string(ev.Entry.Key), s.prefix))
		}
		return out
	}
	if got, want := keysOf(w.until(s.key("p/marker"))), []string{"p/", "p/a", "p/b/c"}; fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		s.t.Errorf("prefix p/: %q, want %q", got, want)
	}
	if got := keysOf(all.until(s.key("p/marker"))); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", keys) {
		s.t.Errorf("empty prefix: %q, want %q", got, keys)
	}
	// From a past revision: the history from there on.
	past := s.watch(s.key(""), from+2, nil)
	s.put("past-marker", "")
	if got := keysOf(past.until(s.key("past-marker"))); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", append(keys[2:], "p/marker")) {
		s.t.Errorf("from revision %d: %q, want %q", from+2, got, append(keys[2:], "p/marker"))
	}
	// From a revision not yet committed: nothing before it.
	now := s.rev()
	future := s.watch(s.key(""), now+3, nil)
	s.put("f1", "")
	s.put("f2", "")
	future.quiet("watch from a revision not yet committed")
	r3 := s.put("f3", "")
	if ev, err, ok := future.next(); !ok || ev.Revision() != r3 || string(ev.Entry.Key) != string(s.key("f3")) {
		s.t.Errorf("watch from revision %d: first %s, %v; want f3 at %d", now+3, evString(ev), err, r3)
	}
	// From 0: the next revision to commit once the watch started, which
	// the caller cannot know; never one committed before it was called.
	// Ten times: a backend that starts from what one replica applied
	// (a lagging one) fails it now and then.
	for try := range 10 {
		before := s.put("before", strconv.Itoa(try))
		zero := s.watch(s.key(""), 0, nil)
		var ev kv.Event
		for i := 0; ; i++ {
			r := s.put("after", strconv.Itoa(i))
			select {
			case ev = <-zero.events:
			case err := <-zero.end:
				s.t.Fatalf("watch from 0 ended: %v", err)
			case <-time.After(100 * time.Millisecond):
				if i < 100 {
					continue
				}
				s.t.Fatalf("watch from 0: no event after %d puts", i+1)
			}
			if ev.Revision() <= before || ev.Revision() > r || string(ev.Entry.Key) != string(s.key("after")) {
				s.t.Fatalf("watch from 0 started with %s, before which %q was committed at %d", evString(ev), "before", before)
			}
			break
		}
		zero.cancel()
	}
}

// testWatchCompacted: once the backend let go of the changes up to
// revision R (the suite's Compact), a watch from R or older ends at
// once with a *kv.CompactedError naming the revision asked and R+1, the
// oldest it can start from; a watch from R+1 works. R is a delete, the
// shape of etcd-io/etcd#18089 (a watch from the compaction revision that
// dropped its delete).
func testWatchCompacted(s *suite) {
	if s.cfg.compact == nil {
		s.t.Skip("no kvapitest.Compact given for this backend")
	}
	r1 := s.put("a", "1")
	s.put("a", "2")
	r3, err := kvapi.Delete(s.ctx(), s.db, s.key("a"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.db = s.cfg.compact(s.t, s.db)
	if got := s.rev(); got != r3 {
		s.t.Fatalf("revision %d after compaction, want %d", got, r3)
	}
	// Each watch from a compacted revision must end before any event:
	// the put after they started is one none of them may yield.
	froms := []kv.Revision{r1, r3 - 1, r3}
	var ws []*watcher
	for _, from := range froms {
		ws = append(ws, s.watch(s.key(""), from, &kvapi.WatchOptions{Prev: true}))
	}
	w := s.watch(s.key(""), r3+1, &kvapi.WatchOptions{Prev: true})
	r4 := s.put("a", "4")
	for i, from := range froms {
		ev, err, ok := ws[i].next()
		if ok {
			s.t.Errorf("watch from %d: %s, want a compacted error first", from, evString(ev))
			ws[i].cancel()
			continue
		}
		var ce *kv.CompactedError
		if !errors.As(err, &ce) || !errors.Is(err, kv.ErrCompacted) || ce.Requested != from || ce.Oldest != r3+1 {
			s.t.Errorf("watch from %d: %v; want a *kv.CompactedError from %d, oldest %d", from, err, from, r3+1)
		}
	}
	if ev, err, ok := w.next(); !ok || ev.Revision() != r4 || string(ev.Entry.Value) != "4" || ev.Prev != nil {
		s.t.Errorf("watch from the oldest revision held: %s, %v; want a's creation at %d", evString(ev), err, r4)
	}
}

// testWatchEnds: a canceled context ends a watch with its error, Close
// with kv.ErrClosed, and a watch after Close is kv.ErrClosed. No event
// comes after the end.
func testWatchEnds(s *suite) {
	from := s.rev() + 1
	w := s.watch(s.key(""), from, nil)
	closing := s.watch(s.key(""), from, nil)
	s.put("a", "1")
	if ev, err, ok := w.next(); !ok || string(ev.Entry.Key) != string(s.key("a")) {
		s.t.Fatalf("first event: %s, %v", evString(ev), err)
	}
	w.cancel()
	if err := w.ended(); !errors.Is(err, context.Canceled) {
		s.t.Errorf("after cancel: %v, want context.Canceled", err)
	}
	if ev, err, ok := closing.next(); !ok || string(ev.Entry.Key) != string(s.key("a")) {
		s.t.Fatalf("first event: %s, %v", evString(ev), err)
	}
	if err := s.db.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.closed = true
	if err := closing.ended(); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("after Close: %v, want kv.ErrClosed", err)
	}
	after := s.watch(s.key(""), from, nil)
	if err := after.ended(); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("watch after Close: %v, want kv.ErrClosed", err)
	}
}
