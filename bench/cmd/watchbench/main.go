// Command watchbench measures Store.Watch's fan-out: the events per
// second a store delivers to 1 and to 100 watchers of every key while
// durable writers go on, what those watchers cost the writers, and how
// long after a Put starts its event reaches a watcher, each as a ratio
// to a figure measured in the same round: the writers' own commit rate
// with no watcher, and their Put latency in the same phase.
//
//	go run ./cmd/watchbench                        # 3 rounds, about 20 s
//	go run ./cmd/watchbench -out results/NAME.md   # a results file: the run (date, commit, command, machine, load) and the tables
//	go run ./cmd/watchbench -short                 # 1 round of short phases: a smoke test
//
// One store, kept open for the whole run. Each round has three live
// phases, in an order rotated by round, of -dur each: -writers goroutines
// each Put keys of their own in a loop (durable, group commit), while 0,
// 1 or -fanout watchers of every key, started before the writers, read
// every event. After the writers stop, one more Put (the sentinel) ends
// the phase: a watcher stops at it. Every watcher checks what it gets:
// the phase's revisions, each once, in order, none missing, and each
// writer's Puts in the order the writer made them. Right after the phase
// with no watcher, 1 and then -fanout watchers read that phase's events
// again from its first revision, out of the store's watch history (the
// catch-up: delivery with no writer to wait for).
//
// A Put's value carries the time it started; a watcher that receives it
// takes the time again: the delivery latency, start of the Put to the
// watcher holding its event, against the Put's own latency, start to
// acknowledgement. The machine is shared and its load is in the results
// file; ratios are taken within a round.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/bench/internal/runinfo"
	"github.com/kvstore/kv/kv"
)

func main() {
	writers := flag.Int("writers", 16, "concurrent durable writers")
	fanout := flag.Int("fanout", 100, "watchers in the fan-out phase")
	dur := flag.Duration("dur", 1500*time.Millisecond, "length of each live phase")
	rounds := flag.Int("rounds", 3, "rounds")
	dir := flag.String("dir", "", "directory for the store (default: a new temporary one, removed at the end)")
	out := flag.String("out", "", "also write the report, headed by the run's date, commit, command, machine and load, to this file")
	short := flag.Bool("short", false, "1 round, 0.3 s phases: a smoke test")
	flag.Parse()
	if *short {
		*rounds, *dur = 1, 300*time.Millisecond
	}
	cfg := config{writers: *writers, fanout: *fanout, dur: *dur, rounds: *rounds, dir: *dir, out: *out}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "watchbench:", err)
		os.Exit(1)
	}
}

type config struct {
	writers, fanout, rounds int
	dur                     time.Duration
	dir, out                string
}

// round holds one round's figures by row id.
type round map[string]float64

const (
	keySize   = 16
	valueSize = 100
	// keysPerWriter is how many keys each writer cycles over.
	keysPerWriter = 1 << 16
	// historyBytes is the watch history: enough for a phase's events, so
	// that the catch-up finds them and no watcher falls out of it.
	historyBytes = 256 << 20
)

// sentinel is the key of the Put that ends a phase.
var sentinel = []byte("~end")

// epoch is what the times carried in values count from.
var epoch = time.Now()

// putKey is writer w's key for its i-th Put: 16 bytes.
func putKey(w, i int) []byte {
	return fmt.Appendf(make([]byte, 0, keySize), "w%03d/%011d", w, i%keysPerWriter)
}

// putValue is writer w's value for its seq-th Put (from 1), started at
// start: start's nanoseconds since epoch, w, seq, then a filler.
func putValue(w int, seq int64, start time.Duration) []byte {
	v := make([]byte, valueSize)
	binary.LittleEndian.PutUint64(v[0:], uint64(start))
	binary.LittleEndian.PutUint32(v[8:], uint32(w))
	binary.LittleEndian.PutUint64(v[12:], uint64(seq))
	for j := 20; j < valueSize; j++ {
		v[j] = byte('a' + j%26)
	}
	return v
}

// checker is what one watcher checks of the events it reads: revisions
// from the first one, each once, in order, with no gap (every commit of
// the run is one Put); each writer's Puts in the writer's order, from its
// first of the phase; a key and value as the writers make them. The
// sentinel ends the stream.
type checker struct {
	next kv.Revision // the revision the next event must have
	seq  []int64     // by writer: the seq of its last Put seen, or -1 before the first
	n    int         // events read, the sentinel left out
	done bool        // the sentinel was read
}

func newChecker(from kv.Revision, writers int) *checker {
	c := &checker{next: from, seq: make([]int64, writers)}
	for i := range c.seq {
		c.seq[i] = -1
	}
	return c
}

// event checks one event; it returns the time the Put started, for the
// latency.
func (c *checker) event(ev kv.Event) (time.Duration, error) {
	if c.done {
		return 0, fmt.Errorf("an event at revision %d after the sentinel", ev.Revision())
	}
	if ev.Revision() != c.next {
		return 0, fmt.Errorf("an event at revision %d where %d was next: a gap, a duplicate or a reordering", ev.Revision(), c.next)
	}
	c.next++
	if ev.Type != kv.EventPut {
		return 0, fmt.Errorf("revision %d: a %v event; the writers only put", ev.Revision(), ev.Type)
	}
	if string(ev.Entry.Key) == string(sentinel) {
		c.done = true
		return 0, nil
	}
	v := ev.Entry.Value
	if len(ev.Entry.Key) != keySize || len(v) != valueSize {
		return 0, fmt.Errorf("revision %d: a key of %d bytes and a value of %d, want %d and %d", ev.Revision(), len(ev.Entry.Key), len(v), keySize, valueSize)
	}
	w := int(binary.LittleEndian.Uint32(v[8:]))
	seq := int64(binary.LittleEndian.Uint64(v[12:]))
	if w >= len(c.seq) || !strings.HasPrefix(string(ev.Entry.Key), fmt.Sprintf("w%03d/", w)) {
		return 0, fmt.Errorf("revision %d: key %q holds a value of writer %d", ev.Revision(), ev.Entry.Key, w)
	}
	if c.seq[w] >= 0 && seq != c.seq[w]+1 {
		return 0, fmt.Errorf("revision %d: writer %d's Put %d after its Put %d", ev.Revision(), w, seq, c.seq[w])
	}
	c.seq[w] = seq
	c.n++
	return time.Duration(binary.LittleEndian.Uint64(v[0:])), nil
}

// finish checks that the stream ended at the sentinel, at revision end,
// after want events.
func (c *checker) finish(end kv.Revision, want int) error {
	switch {
	case !c.done:
		return fmt.Errorf("the watch ended before the sentinel (revision %d); the next event was to be %d", end, c.next)
	case c.next != end+1:
		return fmt.Errorf("the sentinel at revision %d, want %d", c.next-1, end)
	case c.n != want:
		return fmt.Errorf("%d events, want %d", c.n, want)
	}
	return nil
}

func run(cfg config) error {
	base := cfg.dir
	if base == "" {
		d, err := os.MkdirTemp("", "watchbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		base = d
	}
	info := runinfo.Collect("./cmd/watchbench", base)
	s, err := kv.Open(filepath.Join(base, "kv"), &kv.Options{WatchHistoryBytes: historyBytes})
	if err != nil {
		return err
	}
	defer s.Close()
	var rs []round
	var loads []string
	for r := range cfg.rounds {
		loads = append(loads, loadAvg())
		fmt.Fprintf(os.Stderr, "round %d of %d (load %s)\n", r+1, cfg.rounds, loads[r])
		rd, err := oneRound(s, cfg, r)
		if err != nil {
			return err
		}
		rs = append(rs, rd)
	}
	if st := s.Stats(); st.WatchFellBehind != 0 {
		return fmt.Errorf("%d watches fell out of the history", st.WatchFellBehind)
	}
	var b strings.Builder
	report(&b, rs, cfg)
	fmt.Print(b.String())
	if cfg.out == "" {
		return nil
	}
	head := fmt.Sprintf("# watchbench results\n\n%s- load: the machine's 1-minute load average (`/proc/loadavg`) before each round: %s\n\n",
		info.Markdown(), strings.Join(loads, ", "))
	return os.WriteFile(cfg.out, []byte(head+b.String()), 0o644)
}

func oneRound(s *kv.Store, cfg config, r int) (round, error) {
	rd := round{}
	counts := []int{0, 1, cfg.fanout}
	for range r % len(counts) {
		counts = append(counts[1:], counts[0])
	}
	for _, k := range counts {
		ph, err := livePhase(s, cfg, k)
		if err != nil {
			return nil, fmt.Errorf("%d watchers: %w", k, err)
		}
		w := "w" + strconv.Itoa(k)
		if k == cfg.fanout {
			w = "wn"
		}
		rd["puts."+w] = float64(ph.puts) / ph.writeTime.Seconds()
		rd["put.p50."+w] = quantile(ph.putLat, 0.50)
		rd["put.p99."+w] = quantile(ph.putLat, 0.99)
		if k > 0 {
			rd["events."+w] = float64(ph.puts*k) / ph.deliverTime.Seconds()
			rd["lag.p50."+w] = quantile(ph.lag, 0.50)
			rd["lag.p99."+w] = quantile(ph.lag, 0.99)
			continue
		}
		// The catch-up: the phase's events again, from the history.
		for _, kk := range []int{1, cfg.fanout} {
			t, err := catchUp(s, cfg, ph, kk)
			if err != nil {
				return nil, fmt.Errorf("catch-up of %d watchers: %w", kk, err)
			}
			c := "catchup.w1"
			if kk == cfg.fanout {
				c = "catchup.wn"
			}
			rd[c] = float64(ph.puts*kk) / t.Seconds()
		}
	}
	return rd, nil
}

// phase is what a live phase measured.
type phase struct {
	from, end   kv.Revision   // the first revision of the phase, and the sentinel's
	puts        int           // Puts made by the writers, the sentinel left out
	writeTime   time.Duration // from the writers' start to the last one's stop
	deliverTime time.Duration // from the writers' start to the last watcher's sentinel
	putLat, lag []time.Duration
}

// livePhase runs the writers for cfg.dur with k watchers reading every
// event, ends the phase with the sentinel, and checks every watcher's
// stream.
func livePhase(s *kv.Store, cfg config, k int) (*phase, error) {
	ph := &phase{from: s.Revision() + 1}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	checkers := make([]*checker, k)
	lags := make([][]time.Duration, k)
	errs := make([]error, k)
	doneAt := make([]time.Duration, k)
	var ready, wwg sync.WaitGroup
	for i := range k {
		checkers[i] = newChecker(ph.from, cfg.writers)
		ready.Add(1)
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			// ready only has every watcher's goroutine running before
			// the writers start; a watch that registers after the first
			// Put still reads from ph.from.
			ready.Done()
			for ev, err := range s.Watch(ctx, nil, ph.from) {
				if err != nil {
					errs[i] = err
					return
				}
				start, err := checkers[i].event(ev)
				if err != nil {
					errs[i] = err
					cancel()
					return
				}
				if checkers[i].done {
					doneAt[i] = time.Since(epoch)
					return
				}
				lags[i] = append(lags[i], time.Since(epoch)-start)
			}
		}()
	}
	ready.Wait()
	var stop atomic.Bool
	lats := make([][]time.Duration, cfg.writers)
	werrs := make([]error, cfg.writers)
	var wg sync.WaitGroup
	t0 := time.Since(epoch)
	for w := range cfg.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				start := time.Since(epoch)
				if _, err := s.Put(putKey(w, i), putValue(w, int64(i), start)); err != nil {
					werrs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(epoch)-start)
			}
		}()
	}
	time.Sleep(cfg.dur)
	stop.Store(true)
	wg.Wait()
	ph.writeTime = time.Since(epoch) - t0
	for w := range lats {
		if werrs[w] != nil {
			cancel()
			wwg.Wait()
			return nil, werrs[w]
		}
		ph.puts += len(lats[w])
		ph.putLat = append(ph.putLat, lats[w]...)
	}
	end, err := s.Put(sentinel, nil)
	if err != nil {
		cancel()
		wwg.Wait()
		return nil, err
	}
	ph.end = end
	wwg.Wait()
	if ph.puts == 0 {
		return nil, errors.New("no Put completed")
	}
	if got := int(end - ph.from); got != ph.puts {
		return nil, fmt.Errorf("%d revisions before the sentinel, %d Puts: another writer?", got, ph.puts)
	}
	for i := range k {
		if errs[i] != nil {
			return nil, fmt.Errorf("watcher %d: %w", i, errs[i])
		}
		if err := checkers[i].finish(end, ph.puts); err != nil {
			return nil, fmt.Errorf("watcher %d: %w", i, err)
		}
		ph.deliverTime = max(ph.deliverTime, doneAt[i]-t0)
		ph.lag = append(ph.lag, lags[i]...)
	}
	return ph, nil
}

// catchUp starts k watchers from ph's first revision, with ph's events
// in the history, and returns how long they took, together, to read up
// to ph's sentinel; it checks every watcher's stream as livePhase does.
func catchUp(s *kv.Store, cfg config, ph *phase, k int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make([]error, k)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newChecker(ph.from, cfg.writers)
			for ev, err := range s.Watch(ctx, nil, ph.from) {
				if err != nil {
					errs[i] = err
					return
				}
				if _, err := c.event(ev); err != nil {
					errs[i] = err
					return
				}
				if c.done {
					break
				}
			}
			errs[i] = c.finish(ph.end, ph.puts)
		}()
	}
	wg.Wait()
	t := time.Since(start)
	for i, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("watcher %d: %w", i, err)
		}
	}
	return t, nil
}

func quantile(d []time.Duration, p float64) float64 {
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))].Seconds()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// stats returns the median, minimum and maximum of f over the rounds.
func stats(rs []round, f func(round) float64) (float64, float64, float64) {
	var v []float64
	for _, r := range rs {
		v = append(v, f(r))
	}
	slices.Sort(v)
	return v[len(v)/2], v[0], v[len(v)-1]
}

func report(w io.Writer, rs []round, cfg config) {
	n := cfg.fanout
	fmt.Fprintf(w, "## Watch fan-out: %d round(s); %d durable writers, %v per live phase; phases of 0, 1 and %d watchers (wn: %d)\n\n",
		len(rs), cfg.writers, cfg.dur, n, n)
	fmt.Fprintln(w, "Figures, the median of the rounds and their range:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | median | range | what |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fig := func(id, what string, f func(float64) string) {
		m, lo, hi := stats(rs, func(r round) float64 { return r[id] })
		fmt.Fprintf(w, "| %s | %s | %s–%s | %s |\n", id, f(m), strings.TrimSuffix(f(lo), unit(f(lo))), f(hi), what)
	}
	for _, k := range []int{0, 1, n} {
		id, who, to := "w"+strconv.Itoa(k), fmt.Sprintf("%d watchers", k), fmt.Sprintf("the %d watchers together", k)
		if k == n {
			id = "wn"
		}
		if k == 1 {
			who, to = "1 watcher", "1 watcher"
		}
		fig("puts."+id, "durable Puts per second, "+who, perSec)
		fig("put.p50."+id, "Put latency p50, "+who, ms)
		fig("put.p99."+id, "Put latency p99, "+who, ms)
		if k > 0 {
			fig("events."+id, "events per second delivered to "+to+", live", perSec)
			fig("lag.p50."+id, "start of a Put to a watcher holding its event, p50, "+who, ms)
			fig("lag.p99."+id, "start of a Put to a watcher holding its event, p99, "+who, ms)
		}
	}
	fig("catchup.w1", "events per second delivered to 1 watcher reading the 0-watcher phase from the history", perSec)
	fig("catchup.wn", fmt.Sprintf("events per second delivered to %d watchers together reading the 0-watcher phase from the history", n), perSec)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios, taken within each round: the median of the rounds and their range:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ratio | median | range | what |")
	fmt.Fprintln(w, "|---|---|---|---|")
	ratio := func(id, a, b, what string) {
		m, lo, hi := stats(rs, func(r round) float64 { return r[a] / r[b] })
		fmt.Fprintf(w, "| %s | %s | %s–%s | %s |\n", id, x(m), x(lo), x(hi), what)
	}
	ratio("events.w1.vs.puts.w0", "events.w1", "puts.w0", "events/s delivered to 1 watcher ÷ the writers' Puts/s with no watcher")
	ratio("events.wn.vs.puts.w0", "events.wn", "puts.w0", fmt.Sprintf("events/s delivered to %d watchers together ÷ the writers' Puts/s with no watcher", n))
	ratio("puts.w1.vs.w0", "puts.w1", "puts.w0", "the writers' Puts/s with 1 watcher ÷ with none")
	ratio("puts.wn.vs.w0", "puts.wn", "puts.w0", fmt.Sprintf("the writers' Puts/s with %d watchers ÷ with none", n))
	ratio("lag.p50.w1.vs.put", "lag.p50.w1", "put.p50.w1", "delivery p50 (start of a Put to 1 watcher holding its event) ÷ the Put's p50 (start to acknowledgement), same phase")
	ratio("lag.p99.w1.vs.put", "lag.p99.w1", "put.p99.w1", "delivery p99 ÷ the Put's p99, 1 watcher")
	ratio("lag.p50.wn.vs.put", "lag.p50.wn", "put.p50.wn", fmt.Sprintf("delivery p50 ÷ the Put's p50, %d watchers", n))
	ratio("lag.p99.wn.vs.put", "lag.p99.wn", "put.p99.wn", fmt.Sprintf("delivery p99 ÷ the Put's p99, %d watchers", n))
	ratio("catchup.w1.vs.puts.w0", "catchup.w1", "puts.w0", "events/s to 1 watcher reading the history ÷ the writers' Puts/s that made it")
	ratio("catchup.wn.vs.puts.w0", "catchup.wn", "puts.w0", fmt.Sprintf("events/s to %d watchers together reading the history ÷ the writers' Puts/s that made it", n))
}

func unit(s string) string {
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		return s[i:]
	}
	return ""
}

func x(v float64) string {
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 1, 64) + "×"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}

func ms(v float64) string     { return fmt.Sprintf("%.2f ms", v*1e3) }
func perSec(v float64) string { return fmt.Sprintf("%.0f", v) }
