package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// valueSize is the size of every value put, as kvbench's.
const valueSize = 100

// keysPerClient is how many keys of its own each put client writes in
// turn.
const keysPerClient = 8

// result is one timed run: how many operations, in how long, and each
// one's latency, sorted.
type result struct {
	ops     int
	elapsed time.Duration
	lat     []time.Duration
}

// perSec is the run's throughput.
func (r result) perSec() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// perOp is the run's wall time divided by its operations.
func (r result) perOp() time.Duration { return r.elapsed / time.Duration(r.ops) }

// pct is the p-th percentile latency (0 < p ≤ 1).
func (r result) pct(p float64) time.Duration {
	i := int(float64(len(r.lat))*p+0.5) - 1
	return r.lat[max(0, min(i, len(r.lat)-1))]
}

// merge gathers the clients' latencies, sorted.
func merge(lats [][]time.Duration) []time.Duration {
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	return all
}

// value is the i-th value client c puts: it names both, padded to
// valueSize bytes.
func value(c, i int) []byte {
	v := fmt.Sprintf("c%d.%d.", c, i)
	return []byte(v + strings.Repeat("x", valueSize-len(v)))
}

// putClient is what one client of the put workload wrote last.
type putClient struct {
	keys    [keysPerClient][]byte
	lastVal [keysPerClient][]byte
	lastRev [keysPerClient]kv.Revision
	lat     []time.Duration
}

// puts runs clients goroutines, each putting values to keysPerClient
// keys of its own under prefix in turn, one kvapi.Put after another,
// until dur has passed. It fails on the first error, or when a client's
// revisions do not strictly increase (each put returned before the next
// began: a linearizable store commits it later). Then it checks that
// every key holds the value its last put wrote, at the revision that put
// returned.
func puts(ctx context.Context, db kvapi.KV, prefix string, clients int, dur time.Duration) (result, error) {
	cs := make([]*putClient, clients)
	for c := range cs {
		cs[c] = &putClient{}
		for j := range keysPerClient {
			cs[c].keys[j] = fmt.Appendf(nil, "%s/c%03d/k%d", prefix, c, j)
		}
	}
	start := make(chan struct{})
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c, pc := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			deadline := time.Now().Add(dur)
			var prev kv.Revision
			for i := 0; time.Now().Before(deadline); i++ {
				j, v := i%keysPerClient, value(c, i)
				t0 := time.Now()
				rev, err := kvapi.Put(ctx, db, pc.keys[j], v)
				pc.lat = append(pc.lat, time.Since(t0))
				if err != nil {
					errs[c] = fmt.Errorf("client %d, put %d of %q: %w", c, i, pc.keys[j], err)
					return
				}
				if rev <= prev {
					errs[c] = fmt.Errorf("client %d, put %d of %q: revision %d after %d", c, i, pc.keys[j], rev, prev)
					return
				}
				prev = rev
				pc.lastVal[j], pc.lastRev[j] = v, rev
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	lats := make([][]time.Duration, clients)
	for c, pc := range cs {
		lats[c] = pc.lat
		for j, k := range pc.keys {
			if pc.lastVal[j] == nil {
				continue // the run ended before this client reached it
			}
			e, err := db.Get(ctx, k)
			if err != nil {
				return result{}, fmt.Errorf("reading back %q: %w", k, err)
			}
			if string(e.Value) != string(pc.lastVal[j]) || e.ModRev != pc.lastRev[j] {
				return result{}, fmt.Errorf("%q holds %.12q… at revision %d; its last put wrote %.12q… at revision %d", k, e.Value, e.ModRev, pc.lastVal[j], pc.lastRev[j])
			}
		}
	}
	r := result{elapsed: elapsed, lat: merge(lats)}
	r.ops = len(r.lat)
	if r.ops == 0 {
		return result{}, fmt.Errorf("no put in %v", dur)
	}
	return r, nil
}

// lockCycles runs clients goroutines, each with a Locker of its own
// (newLocker), acquiring and releasing lock name one cycle after
// another until dur has passed. A cycle's latency runs from the call to
// Acquire to Release's return, its wait for the lock included. It fails
// on the first error, when two holders hold the lock at once, or when a
// holder's token is not larger than every token before it.
func lockCycles(ctx context.Context, newLocker func() (*filelock.Locker, error), name string, clients int, dur time.Duration) (result, error) {
	lockers := make([]*filelock.Locker, clients)
	for i := range lockers {
		l, err := newLocker()
		if err != nil {
			return result{}, err
		}
		defer l.Close()
		lockers[i] = l
	}
	// The first failure stops every client: a waiter would otherwise
	// wait for a lock its failed holder never releases.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first error
	var once sync.Once
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	var inside, last atomic.Int64
	start := make(chan struct{})
	lats := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	for c, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			deadline := time.Now().Add(dur)
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				h, err := l.Acquire(ctx, name)
				if err != nil {
					fail(fmt.Errorf("client %d, acquire %d: %w", c, i, err))
					return
				}
				n := inside.Add(1)
				err = nextToken(&last, h.Token())
				inside.Add(-1)
				switch {
				case n != 1:
					err = fmt.Errorf("%d holders of %q at once", n, name)
				case err == nil:
					err = h.Release()
				default:
					h.Release()
				}
				if err != nil {
					fail(fmt.Errorf("client %d, cycle %d: %w", c, i, err))
					return
				}
				lats[c] = append(lats[c], time.Since(t0))
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	if first != nil {
		return result{}, first
	}
	r := result{elapsed: elapsed, lat: merge(lats)}
	r.ops = len(r.lat)
	if r.ops == 0 {
		return result{}, fmt.Errorf("no cycle of %q in %v", name, dur)
	}
	return r, nil
}

// nextToken records tok as the lock's latest token, held exclusively by
// its caller, and fails unless it is larger than the one before.
func nextToken(last *atomic.Int64, tok int64) error {
	if prev := last.Swap(tok); tok <= prev {
		return fmt.Errorf("token %d after %d", tok, prev)
	}
	return nil
}
