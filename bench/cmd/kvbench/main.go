// Command kvbench runs the same workloads on this module's kv store, its
// peers (pebble, bbolt, badger, and walmap: tidwall/wal with a Go map) and
// a raw append+fdatasync file, in one run, and prints markdown tables of
// medians, ranges and per-round ratios, headed by the run's date, commit,
// command and machine: a results file.
//
// Each workload of each engine runs in a process of its own (the program
// re-runs itself with a hidden flag), so that one engine's heap and page
// cache state do not tax the next and each peak RSS is its own; the order
// of the engines rotates from one round to the next.
//
//	go run ./cmd/kvbench                 # the full run: 1M keys, 256 MiB, 3 rounds
//	go run ./cmd/kvbench -short          # CI's smoke test: small sizes, 1 round
//	go run ./cmd/kvbench -out results/NAME.md -json results/NAME.json   # a results file
//
// Every workload checks what it reads back (values, counts, scan order)
// and the run fails if any check does; no timing is asserted.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/bench/internal/pagecache"

	"github.com/kvstore/kv/bench/engine"
	"github.com/kvstore/kv/bench/internal/runinfo"
)

// config is the size of a run; every child gets a copy.
type config struct {
	Keys         int           `json:"keys"`                // data set for load, reopen, gets, scan, mixed
	Batch        int           `json:"batch"`               // pairs per batch in the bulk load
	PutDur       time.Duration `json:"put_dur"`             // per writer count and engine
	ReadDur      time.Duration `json:"read_dur"`            // per Get goroutine count and engine
	MixedDur     time.Duration `json:"mixed_dur"`           // per engine
	ReplayBytes  int64         `json:"replay_bytes"`        // of the kv store's log; the others get the same writes
	Rounds       int           `json:"rounds"`              // of every workload but replay
	ReplayRounds int           `json:"replay_rounds"`       // of the replay workload
	Writers      []int         `json:"writers"`             // concurrent writers of the put workload
	NoLoad       bool          `json:"no_load,omitempty"`   // skip load, reopen, gets, scan and mixed
	Workloads    []string      `json:"workloads,omitempty"` // the workloads run (see workloadNames); nil for all
	LogBytes     int64         `json:"log_bytes,omitempty"` // engine.Options.LogBytes of the afterload and killed workloads; 0 for each engine's default
	Cold         string        `json:"cold"`                // how a cold open drops the page cache: pagecache.Drop or pagecache.Fadvise
}

func main() {
	child := flag.String("child", "", "")
	short := flag.Bool("short", false, "small sizes and 1 round: the CI smoke test (about 20 s)")
	keys := flag.Int("keys", 1_000_000, "keys in the data set")
	rounds := flag.Int("rounds", 3, "rounds of every workload but replay")
	replayRounds := flag.Int("replay-rounds", 3, "rounds of the 256 MiB replay workload")
	replayMiB := flag.Int64("replay-mib", 256, "MiB of kv log for the replay workload")
	putDur := flag.Duration("put-dur", 3*time.Second, "duration of each durable-put run")
	readDur := flag.Duration("read-dur", 3*time.Second, "duration of each random-Get run")
	mixedDur := flag.Duration("mixed-dur", 3*time.Second, "duration of each mixed run")
	engines := flag.String("engines", strings.Join(engine.Names, ","), "engines to run, comma-separated")
	dir := flag.String("dir", "", "directory for the stores (default: a new temporary directory, removed at the end)")
	out := flag.String("out", "", "also write the markdown report to this file")
	profile := flag.String("profile", "", "write a CPU profile of every child process into this directory")
	save := flag.String("json", "", "also write every figure of every round to this file, for -report")
	writers := flag.String("writers", "1,16,64", "concurrent writers of the durable-put workload, comma-separated")
	noLoad := flag.Bool("no-load", false, "skip the bulk load and what runs on it (reopen, gets, scan, mixed), and the afterload and killed workloads")
	from := flag.String("report", "", "print the report of a run saved with -json, and run nothing")
	workloads := flag.String("workloads", strings.Join(workloadNames, ","), "workloads to run, comma-separated: "+strings.Join(workloadNames, ", "))
	cold := flag.String("cold", "auto", "how a cold open empties the page cache: drop (drop_caches, needs root), fadvise (posix_fadvise DONTNEED on the store's files), auto (drop if allowed, else fadvise, said in the report)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: kvbench [flags]\n\n")
		flag.VisitAll(func(f *flag.Flag) {
			if f.Name == "child" {
				return
			}
			fmt.Fprintf(flag.CommandLine.Output(), "  -%s\t%s (default %q)\n", f.Name, f.Usage, f.DefValue)
		})
	}
	flag.Parse()
	if *child != "" {
		if err := runChild(*child); err != nil {
			fmt.Fprintln(os.Stderr, "kvbench:", err)
			os.Exit(1)
		}
		return
	}
	if *from != "" {
		if err := rerender(*from, *out); err != nil {
			fmt.Fprintln(os.Stderr, "kvbench:", err)
			os.Exit(1)
		}
		return
	}
	c := config{
		Keys: *keys, Batch: 1000, PutDur: *putDur, ReadDur: *readDur, MixedDur: *mixedDur,
		ReplayBytes: *replayMiB << 20, Rounds: *rounds, ReplayRounds: *replayRounds,
		Writers: []int{1, 16, 64},
	}
	if *short {
		c = config{
			Keys: 20_000, Batch: 1000, PutDur: 200 * time.Millisecond, ReadDur: 200 * time.Millisecond,
			MixedDur: 200 * time.Millisecond, ReplayBytes: 4 << 20, Rounds: 1, ReplayRounds: 1,
			Writers: c.Writers, LogBytes: 4 << 20,
		}
	}
	c.Writers = nil
	for _, w := range strings.Split(*writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "kvbench: -writers: %q is not a positive count of writers\n", w)
			os.Exit(2)
		}
		c.Writers = append(c.Writers, n)
	}
	c.NoLoad = *noLoad
	for _, w := range strings.Split(*workloads, ",") {
		w = strings.TrimSpace(w)
		if !slices.Contains(workloadNames, w) {
			fmt.Fprintf(os.Stderr, "kvbench: -workloads: unknown workload %q (have %v)\n", w, workloadNames)
			os.Exit(2)
		}
		if !(c.NoLoad && slices.Contains(loadWorkloads, w)) && !slices.Contains(c.Workloads, w) {
			c.Workloads = append(c.Workloads, w)
		}
	}
	if !slices.Contains(c.Workloads, "replay") {
		c.ReplayRounds = 0
	}
	method, note, err := pagecache.Method(*cold)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		os.Exit(2)
	}
	c.Cold = method
	if note != "" {
		fmt.Fprintln(os.Stderr, "kvbench:", note)
	}
	names := strings.Split(*engines, ",")
	for _, n := range names {
		if !slices.Contains(engine.Names, n) {
			fmt.Fprintf(os.Stderr, "kvbench: unknown engine %q (have %v)\n", n, engine.Names)
			os.Exit(2)
		}
	}
	if err := run(c, names, *dir, *out, *profile, *save, note); err != nil {
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		os.Exit(1)
	}
}

// workloadNames are the workloads -workloads selects from: the durable
// puts (and the paired ones), the bulk load with the reads of the loaded
// store, the unsynced load with its reopens, the writer killed with a full
// log tail, and the 256 MiB replay with the raw read.
var workloadNames = []string{"puts", "load", "afterload", "killed", "replay"}

// loadWorkloads are the workloads -no-load skips.
var loadWorkloads = []string{"load", "afterload", "killed"}

// has reports whether the run includes workload w.
func (c config) has(w string) bool {
	return c.Workloads == nil || slices.Contains(c.Workloads, w)
}

// runner runs the children of one run and collects their figures.
type runner struct {
	c       config
	engines []string
	exe     string
	base    string
	profile string // directory for CPU profiles, or ""
	cur     int    // the round running
	start   time.Time
	res     results
	load    []float64 // the 1-minute load average before each child
}

func run(c config, engines []string, dir, out, profile, save, coldNote string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	base := dir
	if base == "" {
		if base, err = os.MkdirTemp("", "kvbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(base)
	} else if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	if profile != "" {
		if profile, err = filepath.Abs(profile); err != nil {
			return err
		}
		if err := os.MkdirAll(profile, 0o755); err != nil {
			return err
		}
	}
	// The run is described as it starts: the commit is the code that ran.
	info := runinfo.Collect("./cmd/kvbench", base)
	r := &runner{c: c, engines: engines, exe: exe, base: base, profile: profile, start: time.Now(), res: results{}}
	r.progress("start: %d keys, batches of %d, %d MiB replay, %d rounds (%d of replay), engines %v, in %s",
		c.Keys, c.Batch, c.ReplayBytes>>20, c.Rounds, c.ReplayRounds, engines, base)
	for round := range max(c.Rounds, c.ReplayRounds) {
		r.cur = round
		if round < c.Rounds {
			if err := r.round(round); err != nil {
				return err
			}
		}
		if round < c.ReplayRounds {
			if err := r.replayRound(round); err != nil {
				return err
			}
		}
	}
	r.progress("done")
	s := saved{Run: info, ColdNote: coldNote, Config: c, Engines: engines, Results: r.res, Load: r.load}
	if save != "" {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(save, b, 0o644); err != nil {
			return err
		}
	}
	return writeReport(s, out)
}

// saved is a run's figures as -json writes them.
type saved struct {
	Run      runinfo.Info `json:"run"`
	ColdNote string       `json:"cold_note,omitempty"` // why the cold method is not drop_caches
	Config   config       `json:"config"`
	Engines  []string     `json:"engines"`
	Results  results      `json:"results"`
	Load     []float64    `json:"load"` // the 1-minute load average before each child
	Rendered string       `json:"-"`    // the commit that rendered a saved run again, if it did
}

// loadAverage returns the machine's 1-minute load average: how many
// other runnable jobs shared the machine with the run.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	var l float64
	_, err = fmt.Sscan(string(b), &l)
	return l, err == nil
}

// rerender prints the report of a run saved with -json.
func rerender(name, out string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s.Rendered = runinfo.Collect("./cmd/kvbench", ".").Commit
	return writeReport(s, out)
}

// writeReport prints the report on stdout and, if out is set, writes it
// there too.
func writeReport(s saved, out string) error {
	var buf bytes.Buffer
	report(&buf, s)
	if _, err := io.Copy(os.Stdout, bytes.NewReader(buf.Bytes())); err != nil {
		return err
	}
	if out != "" {
		return os.WriteFile(out, buf.Bytes(), 0o644)
	}
	return nil
}

func (r *runner) progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "kvbench [%s] %s\n", time.Since(r.start).Round(time.Second), fmt.Sprintf(format, a...))
}

// child runs t in a new process and returns its figures.
func (r *runner) child(t task) (result, error) {
	cmd, err := r.command(&t)
	if err != nil {
		return result{}, err
	}
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("%s on %s: %w", t.Name, t.Engine, err)
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil {
		return result{}, fmt.Errorf("%s on %s: bad child output %q: %w", t.Name, t.Engine, out, err)
	}
	return res, nil
}

// profilePath is where the CPU profile of the child named name (task and
// engine) goes in the running round.
func (r *runner) profilePath(name string) string {
	return filepath.Join(r.profile, fmt.Sprintf("%s-r%d.pprof", name, r.cur+1))
}

// record stores res's figures for engine in round, each name prefixed.
func (r *runner) record(engine string, round int, prefix string, res result) {
	for k, v := range res.Metrics {
		r.res.add(engine, prefix+k, round, v)
	}
}

func (r *runner) dir(parts ...string) string {
	return filepath.Join(append([]string{r.base}, parts...)...)
}

// order returns the engines in the order of a round: rotated by one
// engine each round, so that no engine always runs first (on a fresh
// disk, a cool machine) or right after the same neighbour.
func (r *runner) order(round int) []string {
	n := len(r.engines)
	k := round % n
	return append(slices.Clone(r.engines[k:]), r.engines[:k]...)
}

// putRun runs the put task name (puts, pairedputs) of w writers on
// engine e, in a new directory removed after it, and records its figures
// as put<w>.*.
func (r *runner) putRun(round int, name, e string, w int) (result, error) {
	d := r.dir(fmt.Sprintf("%s-%s-%d", name, e, w))
	res, err := r.child(task{Name: name, Engine: e, Dir: d, Writers: w})
	os.RemoveAll(d)
	if err != nil {
		return res, err
	}
	r.record(e, round, fmt.Sprintf("put%d.", w), res)
	return res, nil
}

// round runs one round of the put, load, reopen, get, scan and mixed
// workloads, then the unsynced load and the kill (issue 41), every engine
// in turn for each.
func (r *runner) round(round int) error {
	tag := fmt.Sprintf("round %d/%d", round+1, r.c.Rounds)
	engines := r.order(round)
	if r.c.has("puts") {
		if err := r.putsRound(round, tag, engines); err != nil {
			return err
		}
	}
	if r.c.has("load") && !r.c.NoLoad {
		if err := r.loadRound(round, tag, engines); err != nil {
			return err
		}
	}
	if r.c.has("afterload") && !r.c.NoLoad {
		if err := r.afterLoadRound(round, tag, engines); err != nil {
			return err
		}
	}
	if r.c.has("killed") && !r.c.NoLoad {
		return r.killedRound(round, tag, engines)
	}
	return nil
}

// putsRound runs one round of the durable puts and the paired puts.
func (r *runner) putsRound(round int, tag string, engines []string) error {
	for _, w := range r.c.Writers {
		for _, e := range engines {
			res, err := r.putRun(round, "puts", e, w)
			if err != nil {
				return err
			}
			r.progress("%s puts, %-10s %-6s %s/s, p50 %s, p99 %s (%s)", tag, writersName(w), e,
				fmtCount(res.Metrics["ops"]), fmtDur(res.Metrics["p50"]), fmtDur(res.Metrics["p99"]), res.Note)
		}
	}
	if w := pairedWriters(r.c); w > 0 {
		for _, e := range engines {
			if e == "raw" {
				continue // the limit itself
			}
			res, err := r.putRun(round, "pairedputs", e, w)
			if err != nil {
				return err
			}
			r.progress("%s puts paired with raw's, %-10s %-6s %.2f of the limit", tag, writersName(w), e, res.Metrics["limit"])
		}
	}
	return nil
}

// loadRound runs one round of the bulk load and the reads of the loaded
// store.
func (r *runner) loadRound(round int, tag string, engines []string) error {
	for _, e := range engines {
		d := r.dir("load-" + e)
		res, err := r.child(task{Name: "load", Engine: e, Dir: d})
		if err != nil {
			return err
		}
		r.record(e, round, "", res)
		m := res.Metrics
		r.progress("%s load %d keys, %-6s %s, peak RSS %s (%.0f B/key); reopen in the same process %s, peak RSS %s %s", tag, r.c.Keys, e,
			fmtDur(m["load.s"]), fmtMiB(m["load.rss"]), m["load.rsskey"], fmtDur(m["loadreopen.s"]), fmtMiB(m["loadreopen.rss"]), res.Note)
	}
	// The reads: each cold figure in a process that empties the page
	// cache and opens the store; the warm ones in a process that reads
	// every pair once first. The warm process runs last on each store,
	// since its mixed workload writes.
	for _, kind := range []string{"coldget1", "coldget2", "coldscan", "warm"} {
		for _, e := range engines {
			if e == "raw" {
				continue
			}
			t := task{Name: kind, Engine: e, Dir: r.dir("load-" + e), Round: round}
			switch kind {
			case "coldget1":
				t.Name, t.Readers = "coldget", 1
			case "coldget2":
				t.Name, t.Readers = "coldget", 2
			}
			res, err := r.child(t)
			if err != nil {
				return err
			}
			r.record(e, round, "", res)
			m := res.Metrics
			switch kind {
			case "coldget1", "coldget2":
				r.progress("%s cold open and %d-goroutine gets, %-6s open %s, %s gets/s", tag, t.Readers, e,
					fmtDur(m[fmt.Sprintf("get%d.cold.open.s", t.Readers)]), fmtCount(m[fmt.Sprintf("get%d.cold.ops", t.Readers)]))
			case "coldscan":
				r.progress("%s cold reopen %-6s %s, first ordered read at %s, scan %s, peak RSS %s", tag, e,
					fmtDur(m["reopen.s"]), fmtDur(m["reopen.first.s"]), fmtDur(m["scan.cold.s"]), fmtMiB(m["reopen.rss"]))
			case "warm":
				r.progress("%s warm %-6s get %s/s, 2 goroutines %s/s; scan %s; mixed %s/s, p99 %s", tag, e,
					fmtCount(m["get1.warm.ops"]), fmtCount(m["get2.warm.ops"]), fmtDur(m["scan.warm.s"]),
					fmtCount(m["mixed.ops"]), fmtDur(m["mixed.p99"]))
			}
			if res.Note != "" {
				r.progress("%s %s %s: %s", tag, kind, e, res.Note)
			}
		}
	}
	for _, e := range engines {
		os.RemoveAll(r.dir("load-" + e))
	}
	return nil
}

// replayRound measures the raw read bandwidth, then, engine by engine,
// lays out ReplayBytes of small writes and times the open that replays
// them.
func (r *runner) replayRound(round int) error {
	tag := fmt.Sprintf("replay round %d/%d", round+1, r.c.ReplayRounds)
	if slices.Contains(r.engines, "raw") {
		d := r.dir("readbw")
		res, err := r.child(task{Name: "readbw", Engine: "raw", Dir: d})
		os.RemoveAll(d)
		if err != nil {
			return err
		}
		r.record("raw", round, "", res)
		r.progress("%s raw sequential read of %d MiB: %.0f MB/s cold, %.0f MB/s from the page cache; first touch of new memory %.0f MB/s", tag,
			r.c.ReplayBytes>>20, res.Metrics["readbw.cold"], res.Metrics["readbw.hot"], res.Metrics["memtouch"])
	}
	for _, e := range r.order(round) {
		if e == "raw" {
			continue
		}
		d := r.dir("replay-" + e)
		w, err := r.child(task{Name: "replaywrite", Engine: e, Dir: d})
		if err != nil {
			os.RemoveAll(d)
			return err
		}
		r.record(e, round, "replay.", w)
		res, err := r.child(task{Name: "replayopen", Engine: e, Dir: d})
		os.RemoveAll(d)
		if err != nil {
			return err
		}
		r.record(e, round, "", res)
		r.progress("%s %-6s %d writes in %s; reopen %s (%.0f MB/s), %s on disk", tag, e,
			int(w.Metrics["writes"]), fmtDur(w.Metrics["write.s"]), fmtDur(res.Metrics["replay.s"]),
			res.Metrics["replay.mbs"], fmtMiB(res.Metrics["replay.bytes"]))
	}
	return nil
}
