package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// ev is an event as the tests compare them.
type ev struct {
	Type    string
	Key     string
	Value   string
	Rev     int64
	Create  int64
	Version int64
	Prev    string // the previous value, with WithPrev; "-" when absent
}

func toEv(e kv.Event) ev {
	out := ev{Type: e.Type.String(), Key: string(e.Entry.Key), Value: string(e.Entry.Value),
		Rev: int64(e.Revision()), Create: int64(e.Entry.CreateRev), Version: e.Entry.Version, Prev: "-"}
	if e.Prev != nil {
		out.Prev = string(e.Prev.Value)
	}
	return out
}

// collector runs a watch on a goroutine and hands its events over.
type collector struct {
	events chan ev
	end    chan error
	cancel context.CancelFunc
}

func collectWatch(t *testing.T, watch func(ctx context.Context) iter.Seq2[kv.Event, error]) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{events: make(chan ev, 100000), end: make(chan error, 1), cancel: cancel}
	go func() {
		for e, err := range watch(ctx) {
			if err != nil {
				c.end <- err
				return
			}
			c.events <- toEv(e)
		}
		c.end <- nil
	}()
	t.Cleanup(cancel)
	return c
}

// take waits for n events.
func (c *collector) take(t *testing.T, n int) []ev {
	t.Helper()
	var out []ev
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case e := <-c.events:
			out = append(out, e)
		case err := <-c.end:
			// A watch that yields its last events and then ends has
			// both channels ready, and select picks one at random: the
			// events it sent before its end come first. The end is put
			// back for ended.
			c.end <- err
			select {
			case e := <-c.events:
				out = append(out, e)
				continue
			default:
			}
			t.Fatalf("watch ended after %d of %d events: %v", len(out), n, err)
		case <-timeout:
			t.Fatalf("%d of %d events after 20 s: %v", len(out), n, out)
		}
	}
	return out
}

// none checks that no event arrives for a while.
func (c *collector) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case e := <-c.events:
		t.Fatalf("unexpected event %+v", e)
	case err := <-c.end:
		t.Fatalf("watch ended: %v", err)
	case <-time.After(d):
	}
}

// ended waits for the watch's final error.
func (c *collector) ended(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.end:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not end")
		return nil
	}
}

// watchOps writes the operations every watch test checks the events of.
func watchOps(t *testing.T, s *kv.Store) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Put([]byte("w/a"), []byte("1")) // 1
	must(err)
	_, err = s.Put([]byte("other"), []byte("x")) // 2: not under w/
	must(err)
	_, _, err = s.Add([]byte("w/a"), 5) // 3
	must(err)
	_, err = s.Txn(kv.Txn{If: []kv.Compare{kv.Exists([]byte("w/a"))}, // 4
		Then: []kv.Op{kv.PutOp([]byte("w/b"), []byte("b")), kv.DeleteOp([]byte("w/a")), kv.DeleteOp([]byte("w/none"))}})
	must(err)
	_, err = s.Delete([]byte("w/b")) // 5
	must(err)
}

var wantWatchOps = []ev{
	{Type: "put", Key: "w/a", Value: "1", Rev: 1, Create: 1, Version: 1, Prev: "-"},
	{Type: "put", Key: "w/a", Value: "6", Rev: 3, Create: 1, Version: 2, Prev: "1"},
	{Type: "put", Key: "w/b", Value: "b", Rev: 4, Create: 4, Version: 1, Prev: "-"},
	{Type: "delete", Key: "w/a", Rev: 4, Prev: "6"},
	{Type: "delete", Key: "w/b", Rev: 5, Prev: "b"},
}

// TestWatchEvents: puts, adds (with the sum), each change of a
// transaction, deletes, with previous values, only under the prefix.
func TestWatchEvents(t *testing.T) {
	s, _ := memStore(t, nil)
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, []byte("w/"), 0, kv.WithPrev())
	})
	// The watch starts from the next revision once its goroutine has
	// joined the history: wait for that (up to 20 s), not for a time a
	// loaded machine may not give it.
	eventually(t, func() bool { return s.Stats().Watchers == 1 })
	watchOps(t, s)
	if diff := cmp.Diff(wantWatchOps, c.take(t, len(wantWatchOps))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	c.none(t, 20*time.Millisecond)

	// A watch from an earlier revision replays the history, without Prev.
	c2 := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, []byte("w/"), 3)
	})
	got := c2.take(t, 4)
	want := append([]ev(nil), wantWatchOps[1:]...)
	for i := range want {
		want[i].Prev = "-"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events from revision 3 (-want +got):\n%s", diff)
	}
}

// TestWatchCompacted: a watch from before the store's open, or one that
// fell behind a small history, ends with a CompactedError naming the
// oldest revision it can start from.
func TestWatchCompacted(t *testing.T) {
	s, fsys := memStore(t, &kv.Options{WatchHistoryBytes: 4096})
	for i := range 10 {
		if _, err := s.Put([]byte(fmt.Sprint("k", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = reopen(t, fsys, kv.Options{WatchHistoryBytes: 4096})
	var ce *kv.CompactedError
	for _, err := range s.Watch(context.Background(), nil, 5) {
		if !errors.As(err, &ce) || !errors.Is(err, kv.ErrCompacted) || ce.Requested != 5 || ce.Oldest != 11 {
			t.Fatalf("watch from before the open: %v, want compacted with oldest 11", err)
		}
		break
	}

	// A watcher that does not read while 1,000 puts go by falls behind.
	ctx := context.Background()
	next, stop := iter.Pull2(s.Watch(ctx, nil, 11))
	defer stop()
	if _, err := s.Put([]byte("first"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err, _ := next(); err != nil || string(e.Entry.Key) != "first" {
		t.Fatalf("first event: %+v, %v", e, err)
	}
	for i := range 1000 {
		if _, err := s.Put([]byte(fmt.Sprint("k", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	_, err, _ := next()
	if !errors.As(err, &ce) || ce.Requested != 12 || ce.Oldest <= 12 {
		t.Fatalf("after falling behind: %v, want compacted from 12", err)
	}
	// The writers were never held up, and a new watch from the oldest
	// revision the error names works.
	n := 0
	for e, err := range s.Watch(ctx, nil, ce.Oldest) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if e.Revision() == s.Revision() {
			break
		}
	}
	if n == 0 || n > 1000 {
		t.Errorf("%d events from the oldest revision held", n)
	}
}

// TestWatchOrderConcurrent: 64 writers; the watch yields every committed
// revision once, in order, with the writer's key and value.
func TestWatchOrderConcurrent(t *testing.T) {
	s, _ := memStore(t, nil)
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, nil, 1)
	})
	const writers, each = 64, 40
	var mu sync.Mutex
	committed := map[int64]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := fmt.Sprintf("w%02d/%03d", w, i)
				rev, err := s.Put([]byte(k), []byte(k))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				committed[int64(rev)] = k
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	got := c.take(t, writers*each)
	for i, e := range got {
		if e.Rev != int64(i+1) {
			t.Fatalf("event %d has revision %d: a gap, a duplicate or out of order", i, e.Rev)
		}
		if committed[e.Rev] != e.Key || e.Value != e.Key {
			t.Fatalf("revision %d: event %q=%q, committed %q", e.Rev, e.Key, e.Value, committed[e.Rev])
		}
	}
	c.none(t, 20*time.Millisecond)
}

// TestWatchDurableOnly: under Never a change is yielded only once a sync
// made it durable.
func TestWatchDurableOnly(t *testing.T) {
	s, _ := memStore(t, &kv.Options{Sync: kv.Never})
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, nil, 1)
	})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	c.none(t, 30*time.Millisecond)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := c.take(t, 1); got[0].Key != "a" {
		t.Fatalf("after Sync: %+v", got)
	}
}

// TestWatchEnds: Close ends a watch with ErrClosed after the changes made
// durable before it; a fail-stop with ErrFailed; ctx with its error.
func TestWatchEnds(t *testing.T) {
	s, _ := memStore(t, &kv.Options{Sync: kv.Never})
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, nil, 1)
	})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	s.Close() // syncs the put
	c.take(t, 1)
	if err := c.ended(t); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	for _, err := range s.Watch(context.Background(), nil, 0) {
		if !errors.Is(err, kv.ErrClosed) {
			t.Errorf("watch of a closed store: %v", err)
		}
		break
	}

	h := &hookFS{FS: vfs.NewMem()}
	s2, err := kv.Open("/data", &kv.Options{FS: h})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	c2 := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s2.Watch(ctx, nil, 1)
	})
	boom := errors.New("disk gone")
	h.setSync(func(string) error { return boom })
	if _, err := s2.Put([]byte("a"), []byte("1")); !errors.Is(err, kv.ErrFailed) {
		t.Fatalf("put with a failing sync: %v", err)
	}
	if err := c2.ended(t); !errors.Is(err, kv.ErrFailed) || !errors.Is(err, boom) {
		t.Errorf("after the fail-stop: %v", err)
	}
	select {
	case e := <-c2.events:
		t.Errorf("the failed put was yielded: %+v", e)
	default:
	}

	s3, _ := memStore(t, nil)
	c3 := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s3.Watch(ctx, nil, 0)
	})
	c3.cancel()
	if err := c3.ended(t); !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
}

// TestWatchAfterSync: under Always a change is yielded only after the
// fdatasync that makes it durable has returned.
func TestWatchAfterSync(t *testing.T) {
	h := &hookFS{FS: vfs.NewMem()}
	s, err := kv.Open("/data", &kv.Options{FS: h})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, nil, 1)
	})
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) }) // before Close, on a failure
	entered := make(chan struct{}, 1)
	h.setSync(func(string) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := s.Put([]byte("a"), []byte("1"))
		done <- err
	}()
	<-entered
	c.none(t, 30*time.Millisecond) // the sync has not returned
	h.setSync(nil)
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := c.take(t, 1); got[0].Key != "a" {
		t.Fatalf("after the sync: %+v", got)
	}
}

// TestWatchFromFuture: a watch from a revision not yet committed yields
// nothing before it, though it reads the history from its end.
func TestWatchFromFuture(t *testing.T) {
	s, _ := memStore(t, nil)
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil { // 1
		t.Fatal(err)
	}
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return s.Watch(ctx, nil, 4)
	})
	for i := range 4 { // 2, 3, 4, 5
		if _, err := s.Put([]byte("a"), []byte(fmt.Sprint(i+2))); err != nil {
			t.Fatal(err)
		}
	}
	got := c.take(t, 2)
	if got[0].Rev != 4 || got[1].Rev != 5 {
		t.Fatalf("watch from 4 yielded revisions %d, %d first", got[0].Rev, got[1].Rev)
	}
	c.none(t, 20*time.Millisecond)
}

// TestWatchFromCompactedRevision: the oldest revision a watch can start
// from is the one after the compacted revision, never the compacted one
// itself: the store's history does not hold its events (it begins at the
// open), and the directory's snapshot holds the keys as they are after
// it, not its changes. A watch from it ends with a CompactedError; one
// that started would yield revision 11 first and leave 10 out.
func TestWatchFromCompactedRevision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch func(t *testing.T) iter.Seq2[kv.Event, error]
	}{
		{"store, history from the open", func(t *testing.T) iter.Seq2[kv.Event, error] {
			s, fsys := memStore(t, nil)
			for i := range 10 {
				must(s.Put([]byte(fmt.Sprint("k", i)), []byte("v")))
			}
			s.Close()
			s = reopen(t, fsys, kv.Options{})
			must(s.Put([]byte("after"), []byte("v"))) // 11: what a wrongly started watch yields
			return s.Watch(context.Background(), nil, 10)
		}},
		{"directory, snapshot at 10", func(t *testing.T) iter.Seq2[kv.Event, error] {
			opts := kv.Options{}
			s, fsys := memStore(t, &opts)
			opts.FS = fsys
			for i := range 10 {
				must(s.Put([]byte(fmt.Sprint("k", i)), []byte("v")))
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			must(s.Put([]byte("after"), []byte("v")))
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			return kv.WatchDir(context.Background(), "/data", &opts, nil, 10)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, stop := iter.Pull2(tc.watch(t))
			defer stop()
			e, err, ok := next()
			var ce *kv.CompactedError
			if !ok || !errors.As(err, &ce) {
				t.Fatalf("watch from the compacted revision 10: event at revision %d, %v; want a CompactedError", e.Revision(), err)
			}
			if diff := cmp.Diff(kv.CompactedError{Requested: 10, Oldest: 11}, *ce); diff != "" {
				t.Errorf("CompactedError (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchFallsBehindInsideRevision: a watcher that falls behind after
// it read part of one revision's events (a transaction of more events
// than a watcher copies at a time) is told to resume from that revision,
// not the next: the rest of it was never yielded, and a watch resumed
// from the next would skip it.
func TestWatchFallsBehindInsideRevision(t *testing.T) {
	const ops = 300
	s, _ := memStore(t, &kv.Options{WatchHistoryBytes: 4096})
	rev := s.Revision() + 1
	next, stop := iter.Pull2(s.Watch(context.Background(), nil, rev))
	defer stop()
	var txn kv.Txn
	for i := range ops {
		txn.Then = append(txn.Then, kv.PutOp([]byte(fmt.Sprintf("k%03d", i)), []byte("v")))
	}
	if res, err := s.Txn(txn); err != nil || res.Revision != rev {
		t.Fatalf("Txn: %+v, %v; want revision %d", res, err, rev)
	}
	if e, err, _ := next(); err != nil || e.Revision() != rev {
		t.Fatalf("first event: %+v, %v", e, err)
	}
	// The next commit pushes the big revision out of the small history
	// while the watcher holds only its first batch of it.
	must(s.Put([]byte("after"), []byte("v")))
	read := 1
	var ce *kv.CompactedError
	for {
		e, err, ok := next()
		if !ok {
			t.Fatal("the watch ended without an error")
		}
		if err != nil {
			if !errors.As(err, &ce) {
				t.Fatalf("after falling behind: %v, want a CompactedError", err)
			}
			break
		}
		if e.Revision() != rev {
			t.Fatalf("event of revision %d yielded, want only %d's before the error", e.Revision(), rev)
		}
		read++
	}
	if read >= ops {
		t.Fatalf("the watcher read all %d events of revision %d: it did not fall behind inside it", read, rev)
	}
	if diff := cmp.Diff(kv.CompactedError{Requested: rev, Oldest: rev + 1}, *ce); diff != "" {
		t.Errorf("after %d of revision %d's %d events (-want +got):\n%s", read, rev, ops, diff)
	}
}

// TestHistoryBoundUnsynced: under Never and Interval (whose tick never
// comes here), a load that never calls Sync keeps the watch history
// within WatchHistoryBytes: the changes wait there until durable, so the
// store syncs once they outgrow it, and a watcher sees them. Before, the
// history held every change since the last checkpoint.
func TestHistoryBoundUnsynced(t *testing.T) {
	for _, mode := range []kv.SyncMode{kv.Never, kv.Interval(time.Hour)} {
		const limit = 64 << 10
		s, _ := memStore(t, &kv.Options{Sync: mode, WatchHistoryBytes: limit, CheckpointBytes: -1})
		// Bounded: without the sync, nothing is ever published.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		next, stop := iter.Pull2(s.Watch(ctx, nil, 1))
		value := bytes.Repeat([]byte("v"), 100)
		peak := int64(0)
		for i := range 5000 {
			if _, err := s.Put(fmt.Appendf(nil, "k%d", i%100), value); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, s.Stats().HistoryBytes)
		}
		// One change is at most one entry over the bound.
		if peak > limit+1024 {
			t.Errorf("%v: the history held %d bytes, over its bound of %d", mode, peak, limit)
		}
		// The changes were published: the watch, which read nothing
		// meanwhile, either starts at the first or fell behind the
		// bounded history; it does not wait for a sync.
		if ev, err, _ := next(); err != nil && !errors.Is(err, kv.ErrCompacted) || err == nil && ev.Revision() != 1 {
			t.Errorf("%v: first event %+v, %v", mode, ev, err)
		}
		stop()
		cancel()
	}
}
