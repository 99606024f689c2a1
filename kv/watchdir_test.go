package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestWatchDirEvents: a watch of the directory yields what Store.Watch
// yields for the same writes: the same events, prefix and previous
// values included.
func TestWatchDirEvents(t *testing.T) {
	for _, name := range []string{"mem", "os", "read-only store"} {
		t.Run(name, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			dir := "/data"
			if name == "os" {
				fsys, dir = vfs.OS, t.TempDir()
			}
			s, err := kv.Open(dir, &kv.Options{FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
				return kv.WatchDir(ctx, dir, &kv.Options{FS: fsys}, []byte("w/"), 1, kv.WithPrev())
			})
			if name == "read-only store" {
				// A store opened read-only beside the writer watches
				// the directory.
				ro, err := kv.Open(dir, &kv.Options{FS: fsys, ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				defer ro.Close()
				c.cancel()
				c = collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
					return ro.Watch(ctx, []byte("w/"), 1, kv.WithPrev())
				})
			}
			watchOps(t, s)
			if diff := cmp.Diff(wantWatchOps, c.take(t, len(wantWatchOps))); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchDirAcrossCheckpointsAndRestarts: the watch goes on, with no
// gap and no duplicate, while the writer checkpoints, closes, and a new
// writer opens the directory and writes on.
func TestWatchDirAcrossCheckpointsAndRestarts(t *testing.T) {
	fsys := vfs.NewMem()
	opts := kv.Options{FS: fsys, SegmentSize: 4096}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return kv.WatchDir(ctx, "/data", &opts, nil, 1)
	})
	n := 0
	put := func(s *kv.Store) {
		t.Helper()
		n++
		if _, err := s.Put([]byte(fmt.Sprintf("k%04d", n%50)), []byte(fmt.Sprint(n))); err != nil {
			t.Fatal(err)
		}
	}
	var got []ev
	// The watcher is let catch up before each checkpoint: a watch opens
	// each segment as it appears, and one that a checkpoint outruns (a
	// segment created and deleted before the watch looked) falls behind,
	// as TestWatchDirCompacted shows.
	catchUp := func() {
		t.Helper()
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.take(t, n-len(got))...)
	}
	for round := range 4 {
		for range 100 {
			put(s)
		}
		catchUp()
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			put(s)
		}
		if round%2 == 1 {
			s.Close()
			if s, err = kv.Open("/data", &opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	catchUp()
	for i, e := range got {
		if e.Rev != int64(i+1) || e.Value != fmt.Sprint(i+1) {
			t.Fatalf("event %d: %+v, want revision and value %d", i, e, i+1)
		}
	}
	c.none(t, 20e6)
	s.Close()
}

// TestWatchDirFromNow: a watch from revision 0 yields none of what was
// durable when it started, and everything after, in order.
func TestWatchDirFromNow(t *testing.T) {
	s, fsys := memStore(t, nil)
	for i := range 3 {
		if _, err := s.Put([]byte(fmt.Sprint("old", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	c := collectWatch(t, func(ctx context.Context) iter.Seq2[kv.Event, error] {
		return kv.WatchDir(ctx, "/data", &kv.Options{FS: fsys}, nil, 0)
	})
	// Write until the watch has seen a write: it started somewhere. The
	// writes are bounded by a count, not by how long the watch takes to
	// start: each waits for an event twice as long as the one before,
	// from 1 ms up to 1 s, and after fromNowPuts writes (about 30 s of
	// waiting in all) the test fails.
	const fromNowPuts = 40
	var first ev
	wait := time.Millisecond
	for i := 0; ; i++ {
		if i == fromNowPuts {
			t.Fatalf("a watch from now yielded none of %d writes", i)
		}
		if _, err := s.Put([]byte(fmt.Sprint("new", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-c.events:
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
			continue
		}
		break
	}
	if first.Rev <= 3 {
		t.Fatalf("a watch from now yielded revision %d, durable before it started", first.Rev)
	}
	last := s.Revision()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	rest := c.take(t, int(int64(last)-first.Rev))
	for i, e := range rest {
		if e.Rev != first.Rev+int64(i)+1 {
			t.Fatalf("after revision %d: %+v", first.Rev, rest)
		}
	}
}

// TestWatchDirCompacted: a watch from before the snapshot, and one that
// did not read while checkpoints deleted the segments it had yet to
// open, end with a CompactedError naming the snapshot's next revision.
func TestWatchDirCompacted(t *testing.T) {
	opts := kv.Options{SegmentSize: 4096, LogRetention: -1}
	s, fsys := memStore(t, &opts)
	opts.FS = fsys
	for i := range 20 {
		if _, err := s.Put([]byte(fmt.Sprint("k", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	var ce *kv.CompactedError
	for _, err := range kv.WatchDir(context.Background(), "/data", &opts, nil, 10) {
		if !errors.As(err, &ce) || ce.Requested != 10 || ce.Oldest != 21 {
			t.Fatalf("watch from before the snapshot: %v, want compacted with oldest 21", err)
		}
		break
	}

	next, stop := iter.Pull2(kv.WatchDir(context.Background(), "/data", &opts, nil, 21))
	defer stop()
	if _, err := s.Put([]byte("a"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if e, err, _ := next(); err != nil || e.Revision() != 21 {
		t.Fatalf("first event: %+v, %v", e, err)
	}
	// While the watcher reads nothing, checkpoints delete more segments
	// than it keeps open ahead of its reading.
	for range 40 {
		for i := range 50 {
			if _, err := s.Put([]byte(fmt.Sprint("k", i)), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	want := kv.Revision(22)
	for {
		e, err, ok := next()
		if !ok {
			t.Fatal("the watch ended without an error")
		}
		if err != nil {
			if !errors.As(err, &ce) || ce.Oldest != s.Revision()+1 || ce.Requested != want {
				t.Fatalf("after falling behind: %v, want compacted from %d with oldest %d", err, want, s.Revision()+1)
			}
			break
		}
		if e.Revision() != want {
			t.Fatalf("revision %d yielded, want %d: a gap", e.Revision(), want)
		}
		want++
	}
	if want > s.Revision() {
		t.Fatalf("the watch read everything: it kept %d revisions' segments open", want)
	}
}

// TestWatchDirRetention: a watch that reads nothing while the writer
// fills more segments than it opens ahead, and checkpoints after each,
// goes on past every checkpoint with contiguous revisions while it stays
// within LogRetention of the writer; once further behind than that, it
// ends with a CompactedError, not with a gap.
func TestWatchDirRetention(t *testing.T) {
	const segment, retain = 4096, 256 << 10
	opts := kv.Options{SegmentSize: segment, LogRetention: retain}
	s, fsys := memStore(t, &opts)
	opts.FS = fsys
	if _, err := s.Put([]byte("a"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	start := s.Revision() + 1
	next, stop := iter.Pull2(kv.WatchDir(context.Background(), "/data", &opts, nil, start))
	defer stop()
	if _, err := s.Put([]byte("b"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if e, err, _ := next(); err != nil || e.Revision() != start {
		t.Fatalf("first event: %+v, %v, want revision %d", e, err, start)
	}
	// Write about half the retention, in segments of 4 KiB (four times
	// the 16 a watch opens ahead), with a checkpoint every 8 segments.
	value := bytes.Repeat([]byte("x"), 200)
	writeSegments := func(n int) {
		t.Helper()
		for seg := range n {
			for i := range segment / 256 {
				if _, err := s.Put(fmt.Appendf(nil, "k%d", i), value); err != nil {
					t.Fatal(err)
				}
			}
			if seg%8 == 7 {
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	writeSegments(64)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	segs, err := wal.ListSegments(fsys, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 48 {
		t.Fatalf("%d segments after the checkpoint, want the retention to keep more than 48: %v", len(segs), segs)
	}
	want := start + 1
	for want <= s.Revision() {
		e, err, _ := next()
		if err != nil {
			t.Fatalf("at revision %d of %d, within the retention: %v", want, s.Revision(), err)
		}
		if e.Revision() != want {
			t.Fatalf("revision %d yielded, want %d: a gap", e.Revision(), want)
		}
		want++
	}
	// Now fall further behind than the retention: the watch ends with a
	// CompactedError once it has read what was kept.
	writeSegments(3 * retain / segment)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for {
		e, err, ok := next()
		if !ok {
			t.Fatal("the watch ended without an error")
		}
		if err != nil {
			var ce *kv.CompactedError
			if !errors.As(err, &ce) || ce.Requested != want || ce.Oldest != s.Revision()+1 {
				t.Fatalf("beyond the retention: %v, want compacted from %d with oldest %d", err, want, s.Revision()+1)
			}
			break
		}
		if e.Revision() != want {
			t.Fatalf("revision %d yielded, want %d: a gap", e.Revision(), want)
		}
		want++
	}
}
