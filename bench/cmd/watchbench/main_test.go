package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
)

// ev is an event of writer w's seq-th Put at revision rev, as the
// writers make them.
func ev(rev kv.Revision, w int, seq int64) kv.Event {
	return kv.Event{Type: kv.EventPut, Entry: kv.Entry{Key: putKey(w, int(seq)), Value: putValue(w, seq, 0), ModRev: rev}}
}

func end(rev kv.Revision) kv.Event {
	return kv.Event{Type: kv.EventPut, Entry: kv.Entry{Key: sentinel, ModRev: rev}}
}

// TestCheckerCatches: the check every watcher makes of its stream passes
// a good one and fails on each way a watch could go wrong.
func TestCheckerCatches(t *testing.T) {
	good := []kv.Event{ev(10, 0, 0), ev(11, 1, 0), ev(12, 0, 1), ev(13, 1, 1), end(14)}
	tests := []struct {
		name   string
		events []kv.Event
		ok     bool
	}{
		{"good", good, true},
		{"a writer's first Put of the phase need not be its first", []kv.Event{ev(10, 0, 7), ev(11, 0, 8), ev(12, 1, 3), ev(13, 1, 4), end(14)}, true},
		{"gap", []kv.Event{ev(10, 0, 0), ev(11, 1, 0), ev(13, 1, 1), end(14)}, false},
		{"duplicate", []kv.Event{ev(10, 0, 0), ev(11, 1, 0), ev(11, 1, 0), ev(12, 0, 1), ev(13, 1, 1), end(14)}, false},
		{"revisions out of order", []kv.Event{ev(10, 0, 0), ev(12, 0, 1), ev(11, 1, 0), ev(13, 1, 1), end(14)}, false},
		{"a writer's Puts out of order", []kv.Event{ev(10, 0, 1), ev(11, 1, 0), ev(12, 0, 0), ev(13, 1, 1), end(14)}, false},
		{"a writer's Put left out under a right revision", []kv.Event{ev(10, 0, 0), ev(11, 1, 0), ev(12, 0, 2), ev(13, 1, 1), end(14)}, false},
		{"a delete", []kv.Event{ev(10, 0, 0), {Type: kv.EventDelete, Entry: kv.Entry{Key: putKey(1, 0), ModRev: 11}}, ev(12, 0, 1), ev(13, 1, 1), end(14)}, false},
		{"a value under another writer's key", []kv.Event{ev(10, 0, 0), {Type: kv.EventPut, Entry: kv.Entry{Key: putKey(0, 5), Value: putValue(1, 0, 0), ModRev: 11}}, ev(12, 0, 1), ev(13, 1, 1), end(14)}, false},
		{"an event after the sentinel", append(append([]kv.Event{}, good...), ev(15, 0, 2)), false},
		{"no sentinel", good[:4], false},
		{"the first revision missing", good[1:], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChecker(10, 2)
			var err error
			for _, e := range tt.events {
				if _, err = c.event(e); err != nil {
					break
				}
			}
			if err == nil {
				err = c.finish(14, 4)
			}
			if (err == nil) != tt.ok {
				t.Errorf("ok = %v, want %v (err: %v)", err == nil, tt.ok, err)
			}
		})
	}
}

// TestRunSmall runs the whole benchmark with few watchers and short
// phases, and checks that the results file has every row.
func TestRunSmall(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results.md")
	cfg := config{writers: 4, fanout: 5, dur: 100 * time.Millisecond, rounds: 2, dir: t.TempDir(), out: out}
	if err := run(cfg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| puts.w0 |", "| events.w1 |", "| events.wn |", "| lag.p99.wn |", "| catchup.wn |",
		"| events.w1.vs.puts.w0 |", "| events.wn.vs.puts.w0 |", "| puts.wn.vs.w0 |", "| lag.p99.wn.vs.put |", "| catchup.wn.vs.puts.w0 |",
		"- commit: ", "- load: "} {
		if !strings.Contains(string(b), row) {
			t.Errorf("the results file has no %q", row)
		}
	}
}
