package etcdkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// watchWrite is a put of the fault test: its key and value (unique to
// the write), and the revision it was acknowledged at, 0 when its
// outcome is unknown or it failed.
type watchWrite struct {
	key, value string
	rev        kv.Revision
}

// checkWatchHistory checks the events a watch from revision from gave,
// up to the settling write at revision last, against the writes: every
// revision from from to last once, in order (nothing but the test
// writes, and each write is one put: a revision without its event is a
// dropped event, one twice a doubled one); every acknowledged write's
// event at its revision; every event one of the writes, none twice (a
// write of unknown outcome may be there or not); each event's Prev,
// CreateRev and Version those the events before it left; and the state
// they leave is final, the cluster's state under the prefix.
func checkWatchHistory(evs []kv.Event, from, last kv.Revision, writes []watchWrite, final []kv.Entry) error {
	byValue := map[string]watchWrite{}
	for _, w := range writes {
		byValue[w.value] = w
	}
	seen := map[string]bool{}
	state := map[string]kv.Entry{}
	for i, ev := range evs {
		want := from + kv.Revision(i)
		if ev.Revision() != want {
			return fmt.Errorf("event %d is at revision %d, want %d (dropped, doubled or out of order): %s %q", i, ev.Revision(), want, ev.Type, ev.Entry.Key)
		}
		if ev.Type != kv.EventPut {
			return fmt.Errorf("revision %d: a %s, and the test only puts", want, ev.Type)
		}
		v := string(ev.Entry.Value)
		w, ok := byValue[v]
		switch {
		case !ok || w.key != string(ev.Entry.Key):
			return fmt.Errorf("revision %d: %q=%q, which no write put", want, ev.Entry.Key, v)
		case seen[v]:
			return fmt.Errorf("revision %d: %q=%q a second time", want, ev.Entry.Key, v)
		case w.rev != 0 && w.rev != want:
			return fmt.Errorf("revision %d: %q=%q, acknowledged at revision %d", want, ev.Entry.Key, v, w.rev)
		}
		seen[v] = true
		old, had := state[w.key]
		switch {
		case had && (ev.Prev == nil || !bytes.Equal(ev.Prev.Value, old.Value) || ev.Prev.ModRev != old.ModRev):
			return fmt.Errorf("revision %d: Prev %+v, but the events before left %q at %d", want, ev.Prev, old.Value, old.ModRev)
		case had && (ev.Entry.CreateRev != old.CreateRev || ev.Entry.Version != old.Version+1):
			return fmt.Errorf("revision %d: create %d version %d after create %d version %d", want, ev.Entry.CreateRev, ev.Entry.Version, old.CreateRev, old.Version)
		case !had && ev.Prev != nil:
			// The key may predate the watch only if from is past its
			// creation; the test's keys do not.
			return fmt.Errorf("revision %d: Prev %q for a key the watch saw created nowhere", want, ev.Prev.Value)
		}
		state[w.key] = ev.Entry
	}
	if n := kv.Revision(len(evs)); from+n-1 != last {
		return fmt.Errorf("%d events from revision %d end at %d, want the settling write's %d", n, from, from+n-1, last)
	}
	for _, w := range writes {
		if w.rev != 0 && !seen[w.value] {
			return fmt.Errorf("the write of %q=%q acknowledged at %d has no event", w.key, w.value, w.rev)
		}
	}
	if len(final) != len(state) {
		return fmt.Errorf("the events leave %d keys, the cluster has %d", len(state), len(final))
	}
	for _, e := range final {
		if s, ok := state[string(e.Key)]; !ok || !bytes.Equal(s.Value, e.Value) || s.ModRev != e.ModRev || s.Version != e.Version {
			return fmt.Errorf("the cluster has %q=%q at %d version %d, the events leave %+v", e.Key, e.Value, e.ModRev, e.Version, s)
		}
	}
	return nil
}

// TestWatchCheckCatches: the check of TestWatchLeaderFaults on a good
// history and on the same history with an event dropped, doubled,
// moved, or its Prev lost; with a write acknowledged but absent, or
// acknowledged at another revision; and with an event no write made.
func TestWatchCheckCatches(t *testing.T) {
	var writes []watchWrite
	var evs []kv.Event
	state := map[string]kv.Entry{}
	for i := range 8 {
		rev := kv.Revision(10 + i)
		key := fmt.Sprint("k", i%3)
		w := watchWrite{key: key, value: fmt.Sprint("v", i), rev: rev}
		if i == 5 {
			w.rev = 0 // of unknown outcome, applied
		}
		writes = append(writes, w)
		ev := kv.Event{Type: kv.EventPut, Entry: kv.Entry{Key: []byte(key), Value: []byte(w.value), CreateRev: rev, ModRev: rev, Version: 1}}
		if old, ok := state[key]; ok {
			ev.Entry.CreateRev, ev.Entry.Version = old.CreateRev, old.Version+1
			ev.Prev = &old
		}
		state[key] = ev.Entry
		evs = append(evs, ev)
	}
	writes = append(writes, watchWrite{key: "k9", value: "unknown, not applied"})
	var final []kv.Entry
	for _, k := range []string{"k0", "k1", "k2"} {
		final = append(final, state[k])
	}
	if err := checkWatchHistory(evs, 10, 17, writes, final); err != nil {
		t.Fatalf("a good history: %v", err)
	}
	del := func(i int) []kv.Event { return append(append([]kv.Event(nil), evs[:i]...), evs[i+1:]...) }
	swapped := append([]kv.Event(nil), evs...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	noPrev := append([]kv.Event(nil), evs...)
	noPrev[6].Prev = nil
	lost := append([]watchWrite(nil), writes...)
	lost = append(lost, watchWrite{key: "k1", value: "acked", rev: 13})
	elsewhere := append([]watchWrite(nil), writes...)
	elsewhere[3].rev = 14
	for _, tc := range []struct {
		name   string
		evs    []kv.Event
		writes []watchWrite
		last   kv.Revision
		want   string
	}{
		{"dropped", del(4), writes, 17, "dropped, doubled or out of order"},
		{"dropped last", evs[:7], writes, 17, "end at 16"},
		{"doubled", append(append(append([]kv.Event(nil), evs[:5]...), evs[4]), evs[5:]...), writes, 17, "dropped, doubled or out of order"},
		{"moved", swapped, writes, 17, "dropped, doubled or out of order"},
		{"Prev lost", noPrev, writes, 17, "Prev <nil>"},
		{"acknowledged, absent", evs, lost, 17, "acknowledged at 13 has no event"},
		{"acknowledged at another revision", evs, elsewhere, 17, "acknowledged at revision 14"},
		{"a value no write put", evs, writes[1:], 17, "which no write put"},
	} {
		err := checkWatchHistory(tc.evs, 10, tc.last, tc.writes, final)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// watchFaultConfig is a run of TestWatchLeaderFaults.
type watchFaultConfig struct {
	writers int
	// phaseOps is the writes each phase allows the writers, waited for
	// before the first fault and after each; faultHold is how long each
	// fault lasts (a majority's pause, at least 4 s).
	phaseOps  int
	faultHold time.Duration
	faults    []fault
}

// TestWatchLeaderFaults: writers put while the cluster's leader is
// killed (SIGKILL) and restarted, then paused (SIGSTOP) and resumed,
// then paused with another member, so that the third ends its watches
// for want of a leader (the adapter's watches start again); watches from the revision before the writes began, one on a client of
// each member alone and one on a client of all of them, each yield every
// revision once, in order, every acknowledged write at its revision,
// each with the Prev the events before it left, and end in the
// cluster's state (the shape of etcd-io/etcd#18089, dropped events,
// checked through failover). -long runs longer, with more faults.
//
// What the writers do is bounded by counts, not by the clock (faultRun,
// as in runLinearizability): each phase allows them cfg.phaseOps
// writes; the phases before the first fault and after each end once
// they are done, a fault after cfg.faultHold. The writes, and the
// events each watch keeps, are so bounded however fast or slow the
// machine.
func TestWatchLeaderFaults(t *testing.T) {
	cfg := watchFaultConfig{writers: 2, phaseOps: 150, faultHold: 1200 * time.Millisecond, faults: []fault{killLeader, stopLeader, stopMajority}}
	if *long {
		cfg = watchFaultConfig{writers: 4, phaseOps: 700, faultHold: 5 * time.Second,
			faults: []fault{killLeader, stopLeader, stopMajority, killLeader, stopLeader, stopMajority}}
	}
	c := cluster.ForTest(t, memberBin)
	phases := 2*len(cfg.faults) + 1
	// Five minutes for the cluster's own steps, beside each phase's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+phases)*time.Minute)
	defer cancel()
	all := etcdkv.New(cluster.ClientForTest(t, c), nil)
	_, start, err := all.Range(ctx, []byte("wf/"), nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	from := start + 1

	type watch struct {
		name string
		db   *etcdkv.KV
		mu   sync.Mutex
		evs  []kv.Event
		err  error
		at   chan struct{} // closed at the settling write's event
	}
	settle := []byte("wf/settle")
	var watches []*watch
	for _, m := range c.Members {
		cl, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		watches = append(watches, &watch{name: "client of " + m.Name, db: etcdkv.New(cl, nil)})
	}
	watches = append(watches, &watch{name: "client of every member", db: etcdkv.New(cluster.ClientForTest(t, c), nil)})
	wctx, stopWatches := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	for _, w := range watches {
		w.at = make(chan struct{})
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for ev, err := range w.db.Watch(wctx, []byte("wf/"), from, &kvapi.WatchOptions{Prev: true}) {
				w.mu.Lock()
				if err != nil {
					w.err = err
					w.mu.Unlock()
					return
				}
				w.evs = append(w.evs, ev)
				w.mu.Unlock()
				if bytes.Equal(ev.Entry.Key, settle) {
					close(w.at)
					return
				}
			}
		}()
	}

	var mu sync.Mutex
	var writes []watchWrite
	stats := map[string]int{}
	run := newFaultRun()
	dbs := make([]*etcdkv.KV, cfg.writers)
	for i := range dbs {
		dbs[i] = etcdkv.New(cluster.ClientForTest(t, c), nil)
	}
	var wg sync.WaitGroup
	// A failure part way stops the writers before their connections and
	// the cluster go.
	t.Cleanup(func() { run.end(); wg.Wait() })
	for i, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; run.more(); j++ {
				// Keys shared by the writers, so that Prev and Version
				// chain across writers; values unique to the write.
				w := watchWrite{key: fmt.Sprintf("wf/k%d", j%5), value: fmt.Sprintf("w%d.%d", i, j)}
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				rev, err := kvapi.Put(octx, db, []byte(w.key), []byte(w.value))
				cancel()
				run.done.Add(1)
				mu.Lock()
				switch {
				case err == nil:
					w.rev = rev
					stats["acknowledged"]++
				case errors.Is(err, kvapi.ErrUnknownOutcome):
					stats["unknown outcome"]++
				default:
					stats["failed"]++
				}
				writes = append(writes, w)
				mu.Unlock()
			}
		}()
	}
	run.waitOps(t, cfg.phaseOps, "before the faults")
	for _, f := range cfg.faults {
		l, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, other := c.Members[l], c.Members[(l+1)%len(c.Members)]
		hold := cfg.faultHold
		switch f {
		case killLeader:
			m.Kill()
		case stopLeader:
			m.Stop()
		case stopMajority:
			m.Stop()
			other.Stop()
			// A member ends its streams that require a leader after
			// three election timeouts without one.
			hold = max(hold, 4*time.Second)
		}
		t.Logf("%v leader %s", f, m.Name)
		run.allow(cfg.phaseOps)
		time.Sleep(hold)
		switch f {
		case killLeader:
			if err := m.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		case stopLeader:
			m.Cont()
		case stopMajority:
			m.Cont()
			other.Cont()
		}
		run.waitOps(t, cfg.phaseOps, fmt.Sprintf("after the %v", f))
	}
	run.end()
	wg.Wait()
	// Settle: a write through the new leader commits every entry of the
	// leaders before it, or drops it for good; the watches end at it.
	last, err := kvapi.Put(ctx, all, settle, []byte("settle"))
	if err != nil {
		t.Fatal(err)
	}
	writes = append(writes, watchWrite{key: string(settle), value: "settle", rev: last})
	final, _, err := all.Range(ctx, []byte("wf/"), []byte("wf0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("revisions %d to %d; writes: %v", from, last, stats)
	for _, w := range watches {
		select {
		case <-w.at:
		case <-time.After(time.Minute):
		}
	}
	stopWatches()
	wwg.Wait()
	for _, w := range watches {
		w.mu.Lock()
		if w.err != nil {
			t.Errorf("%s: the watch ended after %d events: %v", w.name, len(w.evs), w.err)
		} else if err := checkWatchHistory(w.evs, from, last, writes, final); err != nil {
			t.Errorf("%s: %v", w.name, err)
		} else {
			t.Logf("%s: %d events, every revision once, in order; %d etcd watches started again", w.name, len(w.evs), etcdkv.Resumes(w.db))
		}
		w.mu.Unlock()
	}
}
