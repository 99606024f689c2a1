package kv_test

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
)

// TestStatsDurability: every commit's sync is in SyncLatency, every
// group in GroupSizes (whose sum is the records committed), and every
// checkpoint in CheckpointTime with the bytes of the snapshot it wrote.
func TestStatsDurability(t *testing.T) {
	s, fsys := memStore(t, nil)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := s.Put([]byte(fmt.Sprint("w", w, "k", i)), []byte("v")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.SyncLatency.Count != st.Syncs+1 { // the commits' syncs and Sync's
		t.Errorf("SyncLatency counts %d syncs, Syncs says %d (+1 for Sync)", st.SyncLatency.Count, st.Syncs)
	}
	if st.GroupSizes.Count != st.Groups || int64(st.GroupSizes.Sum) != st.Records || st.Records != 400 {
		t.Errorf("GroupSizes: %d groups of %v records; Stats: %d groups, %d records (want 400)",
			st.GroupSizes.Count, st.GroupSizes.Sum, st.Groups, st.Records)
	}
	if st.SyncLatency.Quantile(0.99) <= 0 {
		t.Errorf("p99 sync latency %v", st.SyncLatency.Quantile(0.99))
	}
	if st.CheckpointTime.Count != 0 || st.CheckpointBytes != 0 {
		t.Errorf("checkpoints before any: %+v, %d bytes", st.CheckpointTime, st.CheckpointBytes)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st = s.Stats()
	fi, err := fsys.Stat(filepath.Join(s.Dir(), "snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	if st.CheckpointTime.Count != st.Checkpoints || st.Checkpoints < 1 ||
		st.LastCheckpointBytes != fi.Size() || st.CheckpointBytes < fi.Size() {
		t.Errorf("after a checkpoint: %d timed, %d checkpoints, last %d bytes of %d in all; the snapshot has %d",
			st.CheckpointTime.Count, st.Checkpoints, st.LastCheckpointBytes, st.CheckpointBytes, fi.Size())
	}
}

// TestStatsWatchLag: a watcher that stops reading lags by the revisions
// committed since; one that falls out of the history is counted.
func TestStatsWatchLag(t *testing.T) {
	s, _ := memStore(t, &kv.Options{WatchHistoryBytes: 4096})
	ctx := context.Background()
	if st := s.Stats(); st.Watchers != 0 || st.WatchLag != 0 || st.HistoryOldest != 1 {
		t.Fatalf("no watcher yet: %d watchers, lag %d, oldest %d", st.Watchers, st.WatchLag, st.HistoryOldest)
	}
	next, stop := iter.Pull2(s.Watch(ctx, nil, s.Revision()+1))
	put := func(k string) {
		t.Helper()
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	if _, err, _ := next(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Watchers != 1 || st.WatchLag != 0 {
		t.Errorf("caught up: %d watchers, lag %d", st.Watchers, st.WatchLag)
	}
	for i := range 5 {
		put(fmt.Sprint("b", i))
	}
	if st := s.Stats(); st.WatchLag != 5 || st.HistoryBytes == 0 {
		t.Errorf("5 revisions unread: lag %d, history %d bytes", st.WatchLag, st.HistoryBytes)
	}
	for i := range 200 {
		put(fmt.Sprint("c", i))
	}
	if _, err, _ := next(); err == nil {
		t.Fatal("a watcher 200 revisions behind a 4 KiB history was not compacted")
	}
	stop()
	st := s.Stats()
	if st.Watchers != 0 || st.WatchFellBehind != 1 || st.HistoryOldest <= 2 || st.HistoryBytes > 4096 {
		t.Errorf("after it fell behind: %d watchers, %d fell behind, oldest %d, %d bytes held",
			st.Watchers, st.WatchFellBehind, st.HistoryOldest, st.HistoryBytes)
	}
}

// TestStatsLeases: live leases and their keys are counted, and an
// expiry the store commits is counted once per lease.
func TestStatsLeases(t *testing.T) {
	defer catch(t)
	s, _, clk := leaseStore(t)
	a := must(s.Grant(10 * time.Second))
	b := must(s.Grant(time.Hour))
	must(s.PutLease([]byte("a1"), []byte("1"), a))
	must(s.PutLease([]byte("a2"), []byte("2"), a))
	must(s.PutLease([]byte("b1"), []byte("3"), b))
	if st := s.Stats(); st.Leases != 2 || st.LeaseKeys != 3 || st.LeaseExpiries != 0 {
		t.Errorf("two leases, three keys: %d leases, %d keys, %d expiries", st.Leases, st.LeaseKeys, st.LeaseExpiries)
	}
	clk.Advance(11 * time.Second)
	must(s.Put([]byte("x"), []byte("y"))) // a write commits the due expiry first
	if st := s.Stats(); st.Leases != 1 || st.LeaseKeys != 1 || st.LeaseExpiries != 1 {
		t.Errorf("after a's deadline: %d leases, %d keys, %d expiries", st.Leases, st.LeaseKeys, st.LeaseExpiries)
	}
}
