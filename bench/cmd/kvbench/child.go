package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/bench/internal/pagecache"

	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/bench/engine"
)

// task is one child's job: which workload, on which engine, in which
// directory, with the run's configuration.
type task struct {
	Name    string `json:"name"`
	Engine  string `json:"engine"`
	Dir     string `json:"dir"`
	Writers int    `json:"writers,omitempty"`
	Readers int    `json:"readers,omitempty"` // goroutines of a coldget task
	Round   int    `json:"round"`             // the round, which orders the warm gets
	Puts    int    `json:"puts,omitempty"`    // the tail puts a killopen task finds
	Profile string `json:"profile,omitempty"` // write a CPU profile here
	Config  config `json:"config"`
}

// result is what a child prints on stdout: named figures (seconds, bytes,
// ops/s) and a note.
type result struct {
	Metrics map[string]float64 `json:"metrics"`
	Note    string             `json:"note,omitempty"`
}

// runChild runs the task encoded in arg and prints its result. A task
// that must not close its store cleanly (the replay writer, whose log a
// clean close could flush away) exits here without returning.
func runChild(arg string) error {
	var t task
	if err := json.Unmarshal([]byte(arg), &t); err != nil {
		return fmt.Errorf("child task: %w", err)
	}
	if t.Profile != "" {
		f, err := os.Create(t.Profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res := result{Metrics: map[string]float64{}}
	var err error
	switch t.Name {
	case "puts":
		err = childPuts(&t, &res)
	case "pairedputs":
		err = childPairedPuts(&t, &res)
	case "load":
		err = childLoad(&t, &res)
	case "coldget":
		err = childColdGet(&t, &res)
	case "coldscan":
		err = childColdScan(&t, &res)
	case "warm":
		err = childWarm(&t, &res)
	case "replaywrite":
		err = childReplayWrite(&t, &res)
	case "replayopen":
		err = childReplayOpen(&t, &res)
	case "readbw":
		err = childReadBandwidth(&t, &res)
	case "afterload":
		err = childAfterLoad(&t, &res)
	case "afterloadwrite":
		err = childAfterLoadWrite(&t, &res)
	case "afterloadfresh":
		err = childAfterLoadFresh(&t, &res)
	case "killwrite":
		err = childKillWrite(&t, &res)
	case "killopen":
		err = childKillOpen(&t, &res)
	default:
		err = fmt.Errorf("unknown child task %q", t.Name)
	}
	if err != nil {
		return fmt.Errorf("%s on %s: %w", t.Name, t.Engine, err)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// pairWindow is the length of each of childPairedPuts's windows.
const pairWindow = 150 * time.Millisecond

// childPairedPuts measures issue 20's ratio for the put workload:
// t.Writers goroutines of durable Puts on a new store, in windows of
// pairWindow, each followed by a window in which one goroutine puts into
// the raw engine (in a directory beside the store), for PutDur in all.
// Its "limit" is the median over the pairs of (the store's puts per
// second) ÷ (t.Writers ÷ raw's mean latency). The puts workload measures
// the store's writers and raw's one writer in runs seconds apart, on a
// disk whose latency can move by a factor of two in that time; here each
// pair of windows is 300 ms.
func childPairedPuts(t *task, res *result) error {
	e, err := engine.Open(t.Engine, filepath.Join(t.Dir, "store"), engine.Options{})
	if err != nil {
		return err
	}
	defer e.Close()
	raw, err := engine.Open("raw", filepath.Join(t.Dir, "raw"), engine.Options{})
	if err != nil {
		return err
	}
	defer raw.Close()
	const perWriter = 1 << 16 // keys per writer, reused round-robin
	// gate: the writers hold it shared for each put, the raw window
	// alone, so that no put is in flight while raw's run.
	var gate sync.RWMutex
	var puts atomic.Int64
	var stop atomic.Bool
	errs := make([]error, t.Writers)
	var wg sync.WaitGroup
	gate.Lock()
	for w := range t.Writers {
		wg.Go(func() {
			k, v := make([]byte, keySize), make([]byte, valueSize)
			for i := 0; ; i++ {
				gate.RLock()
				if stop.Load() {
					gate.RUnlock()
					return
				}
				putKey(k, w, i%perWriter)
				err := e.Put(k, dataset.Value(v, k, uint64(i)))
				if err == nil {
					puts.Add(1)
				}
				gate.RUnlock()
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	pairs := max(1, int(t.Config.PutDur/(2*pairWindow)))
	ratios := make([]float64, 0, pairs)
	rk, rv := make([]byte, keySize), make([]byte, valueSize)
	var rawErr error
	for j := 0; len(ratios) < pairs && rawErr == nil; {
		n0, t0 := puts.Load(), time.Now()
		gate.Unlock()
		time.Sleep(pairWindow)
		gate.Lock() // waits for the puts in flight
		rate := float64(puts.Load()-n0) / time.Since(t0).Seconds()
		n, t1 := 0, time.Now()
		for time.Since(t1) < pairWindow {
			putKey(rk, 0, j)
			if rawErr = raw.Put(rk, dataset.Value(rv, rk, uint64(j))); rawErr != nil {
				break
			}
			j++
			n++
		}
		if n > 0 {
			lat := time.Since(t1).Seconds() / float64(n)
			ratios = append(ratios, rate/(float64(t.Writers)/lat))
		}
	}
	stop.Store(true)
	gate.Unlock()
	wg.Wait()
	if err := errors.Join(append(errs, rawErr)...); err != nil {
		return err
	}
	slices.Sort(ratios)
	res.Metrics["limit"] = ratios[len(ratios)/2]
	return nil
}

// childPuts runs t.Writers goroutines of durable Puts for PutDur on a new
// store, then checks that every key reads back its last value and that an
// ordered scan finds every key once, in order.
func childPuts(t *task, res *result) error {
	e, err := engine.Open(t.Engine, t.Dir, engine.Options{})
	if err != nil {
		return err
	}
	const perWriter = 1 << 16 // keys per writer, reused round-robin
	n := make([]int, t.Writers)
	lats := make([]latencies, t.Writers)
	errs := make([]error, t.Writers)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for w := range t.Writers {
		wg.Go(func() {
			k, v := make([]byte, keySize), make([]byte, valueSize)
			lat := make(latencies, 0, 1<<12)
			<-begin
			deadline := time.Now().Add(t.Config.PutDur)
			i := 0
			for ; ; i++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				putKey(k, w, i%perWriter)
				if err := e.Put(k, dataset.Value(v, k, uint64(i))); err != nil {
					errs[w] = err
					break
				}
				lat = append(lat, time.Since(t0))
			}
			n[w], lats[w] = i, lat
		})
	}
	start := time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		e.Close()
		return err
	}
	var all latencies
	total := 0
	for w := range t.Writers {
		total += n[w]
		all = append(all, lats[w]...)
	}
	res.Metrics["ops"] = float64(total) / elapsed.Seconds()
	res.Metrics["p50"] = all.percentile(0.50)
	res.Metrics["p99"] = all.percentile(0.99)
	if g, ok := groupSize(e); ok {
		res.Metrics["group"] = g
	}

	// Correctness: every write is there, with its last value.
	if raw, ok := e.(*engine.Raw); ok {
		next := make([]int, t.Writers) // the next i expected from each writer
		var bad error
		count, err := raw.ReadBack(keySize, valueSize, func(key, v []byte) bool {
			gen, err := dataset.Check(key, v)
			if err != nil {
				bad = err
				return false
			}
			w := int(key[7]) // putKey's writer number (< 256)
			if w >= t.Writers || uint64(next[w]) != gen {
				bad = fmt.Errorf("raw record out of order: writer %d, generation %d, expected %d", w, gen, next[w])
				return false
			}
			next[w]++
			return true
		})
		if err == nil {
			err = bad
		}
		if err == nil && count != total {
			err = fmt.Errorf("raw file holds %d records, %d were written", count, total)
		}
		if err != nil {
			e.Close()
			return err
		}
		res.Note = fmt.Sprintf("%d records read back", count)
		return e.Close()
	}
	k := make([]byte, keySize)
	distinct := 0
	for w := range t.Writers {
		for i := max(0, n[w]-perWriter); i < n[w]; i++ {
			putKey(k, w, i%perWriter)
			if err := expectGen(e, k, uint64(i)); err != nil {
				e.Close()
				return err
			}
		}
		distinct += min(n[w], perWriter)
	}
	if err := checkScan(e, distinct); err != nil {
		e.Close()
		return err
	}
	res.Note = fmt.Sprintf("%d puts checked", total)
	return e.Close()
}

// noteOf returns what the engine says it did besides the workload (kv:
// recovery and checkpoints), or "".
func noteOf(e engine.Engine) string {
	if n, ok := e.(interface{ Note() string }); ok {
		return n.Note()
	}
	return ""
}

// groupSize returns the kv store's average group commit size.
func groupSize(e engine.Engine) (float64, bool) {
	s, ok := e.(interface{ AvgGroupSize() float64 })
	if !ok {
		return 0, false
	}
	return s.AvgGroupSize(), true
}

// expectGen checks that key reads back the value of generation gen.
func expectGen(e engine.Engine, key []byte, gen uint64) error {
	var got uint64
	var verr error
	err := e.Get(key, func(v []byte) { got, verr = dataset.Check(key, v) })
	if err != nil {
		return fmt.Errorf("get %x: %w", key, err)
	}
	if verr != nil {
		return verr
	}
	if got != gen {
		return fmt.Errorf("key %x: read back generation %d, last written %d", key, got, gen)
	}
	return nil
}

// checkScan scans the whole store and checks that it holds want pairs, in
// strictly increasing key order, each with a value written for its key.
func checkScan(e engine.Engine, want int) error {
	_, err := timedScan(e, want)
	return err
}

// timedScan is checkScan that also returns how long the scan took.
func timedScan(e engine.Engine, want int) (time.Duration, error) {
	var prev []byte
	count := 0
	var bad error
	start := time.Now()
	err := e.Scan(func(key, v []byte) bool {
		if count > 0 && bytes.Compare(prev, key) >= 0 {
			bad = fmt.Errorf("scan out of order: %x after %x", key, prev)
			return false
		}
		if _, err := dataset.Check(key, v); err != nil {
			bad = fmt.Errorf("scan: %w", err)
			return false
		}
		prev = append(prev[:0], key...)
		count++
		return true
	})
	d := time.Since(start)
	if err == nil {
		err = bad
	}
	if err == nil && count != want {
		err = fmt.Errorf("scan found %d keys, want %d", count, want)
	}
	return d, err
}

// fillBatch fills keys and values with the data set's pairs lo..hi-1 at
// generation gen, reusing their buffers.
func fillBatch(keys, values [][]byte, lo, hi int, gen uint64) ([][]byte, [][]byte) {
	keys, values = keys[:0], values[:0]
	for i := lo; i < hi; i++ {
		j := i - lo
		if j >= cap(keys) {
			keys = append(keys[:j], make([]byte, keySize))
			values = append(values[:j], make([]byte, valueSize))
		} else {
			keys, values = keys[:j+1], values[:j+1]
			if keys[j] == nil {
				keys[j], values[j] = make([]byte, keySize), make([]byte, valueSize)
			}
		}
		dataset.Key(keys[j], i)
		dataset.Value(values[j], keys[j], gen)
	}
	return keys, values
}

// childLoad writes the Keys pairs of the data set in durable batches of
// Batch, closes the store, and reports the time and the peak RSS. Then,
// in the same process, it opens the store again (its files still in the
// page cache: a warm reopen), checks a sample of keys, closes it, and
// reports the time of that open and the process's peak RSS over the load
// and the reopen: the memory a program that loads its data and later
// reopens it sees.
func childLoad(t *task, res *result) error {
	start := time.Now()
	e, err := engine.Open(t.Engine, t.Dir, engine.Options{})
	if err != nil {
		return err
	}
	var keys, values [][]byte
	for lo := 0; lo < t.Config.Keys; lo += t.Config.Batch {
		keys, values = fillBatch(keys, values, lo, min(lo+t.Config.Batch, t.Config.Keys), 0)
		if err := e.PutBatch(keys, values); err != nil {
			e.Close()
			return err
		}
	}
	closeStart := time.Now()
	if err := e.Close(); err != nil {
		return err
	}
	res.Metrics["load.s"] = time.Since(start).Seconds()
	res.Metrics["load.close"] = time.Since(closeStart).Seconds()
	rss, err := peakRSS()
	if err != nil {
		return err
	}
	res.Metrics["load.rss"] = rss
	res.Metrics["load.rsskey"] = rss / float64(t.Config.Keys)
	if t.Engine == "raw" {
		return checkRawLoad(t)
	}
	keys, values = nil, nil

	start = time.Now()
	e, err = engine.Open(t.Engine, t.Dir, engine.Options{})
	if err != nil {
		return err
	}
	res.Metrics["loadreopen.s"] = time.Since(start).Seconds()
	if err := checkSample(e, t.Config.Keys, 0); err != nil {
		e.Close()
		return err
	}
	res.Note = noteOf(e)
	if err := e.Close(); err != nil {
		return err
	}
	if rss, err = peakRSS(); err != nil {
		return err
	}
	res.Metrics["loadreopen.rss"] = rss
	res.Metrics["loadreopen.rsskey"] = rss / float64(t.Config.Keys)
	return nil
}

// checkSample checks that 1,000 random keys of the data set read back
// the value of generation gen.
func checkSample(e engine.Engine, keys int, gen uint64) error {
	r := rand.New(rand.NewPCG(8, 9))
	k := make([]byte, keySize)
	for range 1000 {
		if err := expectGen(e, dataset.Key(k, r.IntN(keys)), gen); err != nil {
			return err
		}
	}
	return nil
}

// checkRawLoad checks that raw's file holds the data set in order.
func checkRawLoad(t *task) error {
	e, err := engine.Open("raw", t.Dir, engine.Options{})
	if err != nil {
		return err
	}
	defer e.Close()
	k := make([]byte, keySize)
	i := 0
	var bad error
	count, err := e.(*engine.Raw).ReadBack(keySize, valueSize, func(key, v []byte) bool {
		if !bytes.Equal(key, dataset.Key(k, i)) {
			bad = fmt.Errorf("raw record %d has key %x, want %x", i, key, k)
			return false
		}
		if _, bad = dataset.Check(key, v); bad != nil {
			return false
		}
		i++
		return true
	})
	if err == nil {
		err = bad
	}
	if err == nil && count != t.Config.Keys {
		err = fmt.Errorf("raw file holds %d records, want %d", count, t.Config.Keys)
	}
	return err
}

// coldOpen empties the page cache by the run's method and opens the
// store: the engine, how long the open took, and the bytes of the store's
// files.
func coldOpen(t *task) (engine.Engine, time.Duration, int64, error) {
	size, err := dirBytes(t.Dir)
	if err != nil {
		return nil, 0, 0, err
	}
	if err := pagecache.Make(t.Config.Cold, t.Dir); err != nil {
		return nil, 0, 0, err
	}
	start := time.Now()
	e, err := engine.Open(t.Engine, t.Dir, engine.Options{})
	if err != nil {
		return nil, 0, 0, err
	}
	return e, time.Since(start), size, nil
}

// childColdGet opens the loaded store cold and runs random Gets with
// t.Readers goroutines for ReadDur: the reads of a process that has just
// started, whatever its store must first bring into memory.
func childColdGet(t *task, res *result) error {
	e, d, _, err := coldOpen(t)
	if err != nil {
		return err
	}
	res.Metrics[fmt.Sprintf("get%d.cold.open.s", t.Readers)] = d.Seconds()
	ops, err := randomGets(e, t.Readers, t.Config.Keys, t.Config.ReadDur)
	if err != nil {
		e.Close()
		return err
	}
	res.Metrics[fmt.Sprintf("get%d.cold.ops", t.Readers)] = ops
	res.Note = noteOf(e)
	return e.Close()
}

// childColdScan opens the loaded store cold and times the open, the
// first entry of an ordered scan, and then a full ordered scan; the peak
// RSS is taken before the full scan (the open alone, with the first
// ordered read).
func childColdScan(t *task, res *result) error {
	e, d, size, err := coldOpen(t)
	if err != nil {
		return err
	}
	fail := func(err error) error { e.Close(); return err }
	res.Metrics["reopen.s"] = d.Seconds()
	res.Metrics["reopen.mbs"] = float64(size) / 1e6 / d.Seconds()
	res.Metrics["reopen.bytes"] = float64(size)
	first, err := firstOrdered(e)
	if err != nil {
		return fail(err)
	}
	res.Metrics["reopen.first.s"] = (d + first).Seconds()
	rss, err := peakRSS()
	if err != nil {
		return fail(err)
	}
	res.Metrics["reopen.rss"] = rss
	res.Metrics["reopen.rsskey"] = rss / float64(t.Config.Keys)
	sd, err := timedScan(e, t.Config.Keys)
	if err != nil {
		return fail(err)
	}
	res.Metrics["scan.cold.s"] = sd.Seconds()
	res.Note = noteOf(e)
	return e.Close()
}

// childWarm opens the loaded store, reads every pair once (a full
// ordered scan, untimed), and then times random Gets with 1 and 2
// goroutines (which first alternates by round), a full ordered scan, and
// the mixed workload, which writes, last.
func childWarm(t *task, res *result) error {
	e, err := engine.Open(t.Engine, t.Dir, engine.Options{})
	if err != nil {
		return err
	}
	fail := func(err error) error { e.Close(); return err }
	if _, err := timedScan(e, t.Config.Keys); err != nil {
		return fail(err)
	}
	gs := []int{1, 2}
	if t.Round%2 == 1 {
		gs = []int{2, 1}
	}
	for _, g := range gs {
		ops, err := randomGets(e, g, t.Config.Keys, t.Config.ReadDur)
		if err != nil {
			return fail(err)
		}
		res.Metrics[fmt.Sprintf("get%d.warm.ops", g)] = ops
	}
	sd, err := timedScan(e, t.Config.Keys)
	if err != nil {
		return fail(err)
	}
	res.Metrics["scan.warm.s"] = sd.Seconds()
	rss, err := peakRSS()
	if err != nil {
		return fail(err)
	}
	res.Metrics["warm.rss"] = rss
	if n := noteOf(e); n != "" {
		res.Note = n + " (before the mixed workload)"
	}
	if err := mixed(e, t.Config, res); err != nil {
		return fail(err)
	}
	return e.Close()
}

// firstOrdered times an ordered scan that stops at its first entry, run
// right after an open: an engine that returns from Open before it can
// read in key order (kv builds its ordered tree in the background) pays
// the rest here.
func firstOrdered(e engine.Engine) (time.Duration, error) {
	start := time.Now()
	n := 0
	err := e.Scan(func(key, value []byte) bool { n++; return false })
	if err == nil && n != 1 {
		err = fmt.Errorf("an ordered scan of the data set found %d entries, want at least one", n)
	}
	return time.Since(start), err
}

// randomGets runs g goroutines of Gets of random keys of the data set for
// d, checks every value, and returns the rate.
func randomGets(e engine.Engine, g, keys int, d time.Duration) (float64, error) {
	var total atomic.Int64
	errs := make([]error, g)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range g {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			k := make([]byte, keySize)
			var verr error
			check := func(v []byte) { _, verr = dataset.Check(k, v) }
			n := 0
			for {
				if n%256 == 0 && !time.Now().Before(deadline) {
					break
				}
				dataset.Key(k, r.IntN(keys))
				if err := e.Get(k, check); err != nil {
					errs[w] = fmt.Errorf("get %x: %w", k, err)
					break
				}
				if verr != nil {
					errs[w] = verr
					break
				}
				n++
			}
			total.Add(int64(n))
		})
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds(), errors.Join(errs...)
}

// The mixed workload's shape: of every 100 operations, 50 Gets, 40 Puts
// and 10 Adds of 1 to one of mixedCounters counters.
const (
	mixedWriters  = 16
	mixedCounters = 64
)

// mixed runs the mixed workload on the loaded store for MixedDur and
// checks that the counters add up to the Adds made.
func mixed(e engine.Engine, c config, res *result) error {
	var adds atomic.Int64
	n := make([]int, mixedWriters)
	lats := make([]latencies, mixedWriters)
	errs := make([]error, mixedWriters)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(c.MixedDur)
	counters := make([][]byte, mixedCounters)
	for i := range counters {
		counters[i] = counterKey(i)
	}
	for w := range mixedWriters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 11))
			k, v := make([]byte, keySize), make([]byte, valueSize)
			var verr error
			check := func(b []byte) { _, verr = dataset.Check(k, b) }
			lat := make(latencies, 0, 1<<12)
			i := 0
			for ; ; i++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				var err error
				switch p := r.IntN(100); {
				case p < 50:
					dataset.Key(k, r.IntN(c.Keys))
					err = e.Get(k, check)
					if err == nil {
						err = verr
					}
				case p < 90:
					dataset.Key(k, r.IntN(c.Keys))
					err = e.Put(k, dataset.Value(v, k, uint64(1+w)))
				default:
					if _, err = e.Add(counters[r.IntN(mixedCounters)], 1); err == nil {
						adds.Add(1)
					}
				}
				if err != nil {
					errs[w] = err
					break
				}
				lat = append(lat, time.Since(t0))
			}
			n[w], lats[w] = i, lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var all latencies
	total := 0
	for w := range mixedWriters {
		total += n[w]
		all = append(all, lats[w]...)
	}
	res.Metrics["mixed.ops"] = float64(total) / elapsed.Seconds()
	res.Metrics["mixed.p50"] = all.percentile(0.50)
	res.Metrics["mixed.p99"] = all.percentile(0.99)
	var sum int64
	for _, key := range counters {
		err := e.Get(key, func(b []byte) {
			var x int64
			if _, err := fmt.Sscan(string(b), &x); err == nil {
				sum += x
			}
		})
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
	}
	if sum != adds.Load() {
		return fmt.Errorf("mixed: the counters add up to %d after %d adds of 1", sum, adds.Load())
	}
	return nil
}

// replayWrites is how many Puts make ReplayBytes of the kv store's log.
func replayWrites(c config) int {
	return int((c.ReplayBytes + int64(kvLogBytesPerPut()) - 1) / int64(kvLogBytesPerPut()))
}

// replayWriters is how many goroutines lay out the replay log; writer g
// writes the data-set keys i with i%replayWriters == g, so each key is
// written by one goroutine, in order.
const replayWriters = 16

// childReplayWrite writes ReplayBytes worth of small writes (one record
// each, over the data set's keys round-robin), makes them durable, and
// exits without closing the store, as a crash would: the next open must
// replay whatever the engine had not yet checkpointed or flushed. The
// engines are opened with NoSync and synced once at the end: each write
// is still its own record in the log (the kv store, pebble and badger log
// one record per write, however many share a sync), so the log is the one
// durable writes would leave, laid out in seconds instead of minutes.
// bbolt has no log: it gets the same writes as Updates of Batch each.
func childReplayWrite(t *task, res *result) error {
	e, err := engine.Open(t.Engine, t.Dir, engine.Options{NoSync: true, NoCheckpoint: true})
	if err != nil {
		return err
	}
	c := t.Config
	n := replayWrites(c)
	start := time.Now()
	if t.Engine == "bbolt" {
		var keys, values [][]byte
		for lo := 0; lo < n; lo += c.Batch {
			keys, values = keys[:0], values[:0]
			for i := lo; i < min(lo+c.Batch, n); i++ {
				k := dataset.Key(make([]byte, keySize), i%c.Keys)
				keys = append(keys, k)
				values = append(values, dataset.Value(make([]byte, valueSize), k, uint64(i/c.Keys)))
			}
			if err := e.PutBatch(keys, values); err != nil {
				return err
			}
		}
	} else {
		g := replayWriters
		if c.Keys%g != 0 {
			g = 1
		}
		errs := make([]error, g)
		var wg sync.WaitGroup
		for w := range g {
			wg.Go(func() {
				k, v := make([]byte, keySize), make([]byte, valueSize)
				for i := w; i < n; i += g {
					dataset.Key(k, i%c.Keys)
					if err := e.Put(k, dataset.Value(v, k, uint64(i/c.Keys))); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if err := e.Sync(); err != nil {
		return err
	}
	res.Metrics["write.s"] = time.Since(start).Seconds()
	res.Metrics["writes"] = float64(n)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return err
	}
	// No Close: the store is left as a crash after the last sync leaves
	// it (the locks go with the process).
	pprof.StopCPUProfile()
	os.Exit(0)
	return nil
}

// childReplayOpen opens the store childReplayWrite left cold, times the
// open, and checks the contents.
func childReplayOpen(t *task, res *result) error {
	e, d, size, err := coldOpen(t)
	if err != nil {
		return err
	}
	c := t.Config
	res.Metrics["replay.s"] = d.Seconds()
	res.Metrics["replay.mbs"] = float64(c.ReplayBytes) / 1e6 / d.Seconds()
	res.Metrics["replay.bytes"] = float64(size)
	first, err := firstOrdered(e)
	if err != nil {
		e.Close()
		return err
	}
	res.Metrics["replay.first.s"] = (d + first).Seconds()
	rss, err := peakRSS()
	if err != nil {
		e.Close()
		return err
	}
	res.Metrics["replay.rss"] = rss

	n := replayWrites(c)
	distinct := min(n, c.Keys)
	if err := checkScan(e, distinct); err != nil {
		e.Close()
		return err
	}
	r := rand.New(rand.NewPCG(3, 4))
	k := make([]byte, keySize)
	for range min(10000, distinct) {
		j := r.IntN(distinct)
		if err := expectGen(e, dataset.Key(k, j), uint64((n-1-j)/c.Keys)); err != nil {
			e.Close()
			return err
		}
	}
	return e.Close()
}

// childReadBandwidth writes a file of ReplayBytes, makes it durable, drops
// it from the page cache and reads it sequentially twice: the first read
// is the disk's bandwidth (the yardstick for replay), the second the page
// cache's.
func childReadBandwidth(t *task, res *result) error {
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return err
	}
	name := filepath.Join(t.Dir, "read.bin")
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(5, 6))
	for off := int64(0); off < t.Config.ReplayBytes; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			x := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(x >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), t.Config.ReplayBytes-off)]); err != nil {
			return err
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return err
	}
	for _, pass := range []string{"cold", "hot"} {
		start := time.Now()
		var n int64
		for {
			m, err := f.ReadAt(buf, n)
			n += int64(m)
			if err != nil {
				break
			}
		}
		if n != t.Config.ReplayBytes {
			return fmt.Errorf("read %d bytes of %d", n, t.Config.ReplayBytes)
		}
		res.Metrics["readbw."+pass] = float64(n) / 1e6 / time.Since(start).Seconds()
	}
	// The other bound of a store that loads its data: the first write to
	// each page of memory new to the process, which costs a page fault
	// (and on a virtual machine, often the host's backing of the page).
	start := time.Now()
	mem := make([]byte, t.Config.ReplayBytes)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	res.Metrics["memtouch"] = float64(len(mem)) / 1e6 / time.Since(start).Seconds()
	runtime.KeepAlive(mem)
	return nil
}
