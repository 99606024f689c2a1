package kv

import (
	"context"
	"testing"
	"time"
)

// TestHistoryTakenBack: a flusher that has not taken a group's changes
// for the watch history by the end of the group's sync (busy with a
// backlog of the ordered tree; here, one that never reads them) holds up
// neither the group nor the history: the committer takes them back and
// adds them itself.
func TestHistoryTakenBack(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The flusher reads the channel it was started with; the committer
	// now hands its jobs to one no one reads. The Put's send on the
	// queue orders this write before the committer's read.
	s.c.histJob = make(chan []staged, 1)
	done := make(chan error, 1)
	go func() {
		_, err := s.Put([]byte("a"), []byte("1"))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		s.c.histDone <- struct{}{} // let the committer, and Close, go on
		t.Fatal("the Put waits for a flusher that never takes the history's job")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ev, err := range s.Watch(ctx, nil, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Entry.Key) != "a" || string(ev.Entry.Value) != "1" {
			t.Errorf("event %q=%q, want a=1", ev.Entry.Key, ev.Entry.Value)
		}
		break
	}
}
