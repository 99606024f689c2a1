// Command openbench measures the read side of issue 20 (a snapshot that
// opens in milliseconds) on the kv store against bbolt and pebble, on
// one data set built once per engine: kvbench's 16-byte keys and
// 100-byte values, 1M of them by default.
//
//	cd bench
//	go run ./cmd/openbench                              # 1M keys, 3 rounds
//	go run ./cmd/openbench -short                       # a smoke test: 20k keys, 1 round
//	go run ./cmd/openbench -out results/NAME.md -json results/NAME.json
//
// The kv store is used only through its public API (kv.Open, Get, Scan,
// Txn, Checkpoint, Close) and through the kv command built from this
// checkout, so the benchmark measures whatever the store is when it runs.
// Each round, in an order of engines rotated by round:
//
//  1. reopen, warm: a new child process opens the store, its files in
//     the page cache: the open's time, the process's resident set
//     (VmRSS) and Go heap in use (after a GC) after it, the first Get.
//     -reopen-runs children per engine, each right after its own
//     warm-up, the engines interleaved; each figure is their median.
//  2. read: a new child per engine opens the store and runs random Gets
//     on one goroutine, untimed; then the children take -get-slices
//     slices of timed Gets in turn (so that a noisy neighbour slows all
//     engines alike, not one engine's whole figure); then each runs a
//     full scan in key order and reports the heap in use after a GC
//     (per key).
//  3. one-shot: the whole process `kv DIR get KEY` (the command built
//     from this checkout) against `bbolt get DB BUCKET KEY` (bbolt's
//     command at the version of bench/go.mod), and a one-shot child of
//     this program per engine (read-only open, one Get, close), to tell
//     the command's start-up from the store's open. Wall time, median of
//     -cli-runs runs.
//  4. reopen, cold: the store's files out of the page cache first
//     (drop_caches as root, else posix_fadvise), then open and one Get:
//     its time, major page faults and bytes read.
//
// Every figure is reported with kv's ratio to each peer in the same
// round. Every Get, scan and command output is checked against the data
// set; no timing is asserted anywhere.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/bench/internal/pagecache"

	"github.com/kvstore/kv/bench/internal/runinfo"
)

// config is the size of a run.
type config struct {
	Keys    int           `json:"keys"`
	Rounds  int           `json:"rounds"`
	GetDur  time.Duration `json:"get_dur"`
	CLIRuns int           `json:"cli_runs"`
	// ReopenRuns is the warm reopens per engine and round; 0 in the
	// runs saved before there were several (one each).
	ReopenRuns int `json:"reopen_runs,omitempty"`
	// GetSlices is the slices the timed Gets of each engine are taken
	// in, in turn; 0 in the runs saved before (all at once, one engine
	// after the other).
	GetSlices int    `json:"get_slices,omitempty"`
	Cold      string `json:"cold"` // the method, resolved
}

// shortConfig is -short's run: a smoke test that runs every step.
func shortConfig() config {
	return config{Keys: 20_000, Rounds: 1, GetDur: 200 * time.Millisecond, CLIRuns: 3, ReopenRuns: 3, GetSlices: 4}
}

func main() {
	c := config{}
	flag.IntVar(&c.Keys, "keys", 1_000_000, "keys in the data set")
	flag.IntVar(&c.Rounds, "rounds", 3, "rounds of measurements")
	flag.DurationVar(&c.GetDur, "get-dur", 2*time.Second, "how long the timed random Gets run (after a warm-up of half that)")
	flag.IntVar(&c.GetSlices, "get-slices", 10, "slices the timed Gets of each engine are taken in, the engines in turn")
	flag.IntVar(&c.CLIRuns, "cli-runs", 5, "one-shot processes per command and round (the round's figure is their median)")
	flag.IntVar(&c.ReopenRuns, "reopen-runs", 5, "warm reopens per engine and round, each after its own warm-up (the round's figures are their medians)")
	short := flag.Bool("short", false, "a smoke test: 20k keys, 1 round, 0.2 s of Gets, 3 one-shot and 3 reopen runs")
	cold := flag.String("cold", "auto", "how a cold open empties the page cache: drop (drop_caches, needs root), fadvise, or auto")
	dir := flag.String("dir", "", "where the stores go (default: a new temporary directory, removed at the end)")
	kvCLI := flag.String("kv-cli", "", "the kv command to time (default: built from this checkout)")
	boltCLI := flag.String("bbolt-cli", "", "the bbolt command to time (default: built from the module cache at bench/go.mod's version)")
	out := flag.String("out", "", "also write the report to this file")
	save := flag.String("json", "", "also write every figure of every round to this file")
	rerender := flag.String("report", "", "print the report of a run saved with -json, and exit")
	child := flag.String("child", "", "internal: run one child task")
	flag.Parse()
	var err error
	switch {
	case *child != "":
		err = runChild(*child)
	case *rerender != "":
		err = reportSaved(*rerender, *out)
	default:
		if *short {
			c = shortConfig()
		}
		var note string
		if c.Cold, note, err = pagecache.Method(*cold); err == nil {
			err = run(c, note, *dir, *kvCLI, *boltCLI, *out, *save)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openbench:", err)
		os.Exit(1)
	}
}

// results are a run's figures: per round, per engine, per row id.
type results []map[string]map[string]float64

func (r results) set(round int, engine, id string, v float64) {
	if r[round][engine] == nil {
		r[round][engine] = map[string]float64{}
	}
	r[round][engine][id] = v
}

// saved is a run as -json writes it and -report reads it.
type saved struct {
	Run      runinfo.Info `json:"run"`
	Config   config       `json:"config"`
	ColdNote string       `json:"cold_note,omitempty"` // why the cold method is not drop_caches
	KVCLI    string       `json:"kv_cli"`              // how the kv command was made
	BoltCLI  string       `json:"bbolt_cli"`           // how the bbolt command was made, or why it was not
	// BoltChild says bbolt's command could not be built: its cli rows
	// are the bbolt one-shot child's.
	BoltChild bool               `json:"bbolt_child,omitempty"`
	Sizes     map[string]int64   `json:"sizes"` // bytes of each engine's files
	Build     map[string]float64 `json:"build"` // seconds each engine's build took
	Results   results            `json:"results"`
	Load      []float64          `json:"load"` // the 1-minute load average before each step
	Rendered  string             `json:"-"`    // the commit that rendered a saved run again
}

// runner runs one benchmark.
type runner struct {
	c       config
	exe     string
	base    string
	kvCLI   string
	boltCLI string // "" when bbolt's command could not be built
	start   time.Time
	s       saved
}

func (r *runner) dir(e string) string { return filepath.Join(r.base, e) }

func (r *runner) progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "openbench [%s] %s\n", time.Since(r.start).Round(time.Second), fmt.Sprintf(format, a...))
}

func run(c config, coldNote, dir, kvCLI, boltCLI, out, save string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	base := dir
	if base == "" {
		if base, err = os.MkdirTemp("", "openbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(base)
	} else if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	r := &runner{c: c, exe: exe, base: base, start: time.Now()}
	// The run is described as it starts: the commit is the code that ran.
	r.s = saved{Run: runinfo.Collect("./cmd/openbench", base), Config: c, ColdNote: coldNote,
		Sizes: map[string]int64{}, Build: map[string]float64{}}
	if err := r.commands(kvCLI, boltCLI); err != nil {
		return err
	}
	for _, e := range engines {
		start := time.Now()
		if err := build(e, r.dir(e), c.Keys); err != nil {
			return fmt.Errorf("build %s: %w", e, err)
		}
		r.s.Build[e] = time.Since(start).Seconds()
		n, err := dirBytes(r.dir(e))
		if err != nil {
			return err
		}
		r.s.Sizes[e] = n
		r.progress("built %s: %d keys, %.1f MiB, in %v", e, c.Keys, float64(n)/(1<<20), time.Since(start).Round(time.Millisecond))
	}
	r.s.Results = make(results, c.Rounds)
	for round := range c.Rounds {
		r.s.Results[round] = map[string]map[string]float64{}
		if err := r.round(round); err != nil {
			return fmt.Errorf("round %d: %w", round+1, err)
		}
	}
	r.progress("done")
	if save != "" {
		b, err := json.MarshalIndent(r.s, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(save, b, 0o644); err != nil {
			return err
		}
	}
	return writeReport(r.s, out)
}

// commands finds or builds the two commands the one-shot step times.
func (r *runner) commands(kvCLI, boltCLI string) error {
	bin := filepath.Join(r.base, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if kvCLI != "" {
		r.kvCLI, r.s.KVCLI = kvCLI, "given with -kv-cli: "+kvCLI
	} else {
		// The kv module's own go.mod builds its command: the bench module
		// does not require the command's dependencies (cobra).
		root, err := goOutput("", nil, "list", "-m", "-f", "{{.Dir}}", "github.com/kvstore/kv")
		if err != nil {
			return fmt.Errorf("finding the kv module: %w", err)
		}
		r.kvCLI = filepath.Join(bin, "kv")
		if _, err := goOutput(root, nil, "build", "-o", r.kvCLI, "./cmd/kv"); err != nil {
			return fmt.Errorf("building the kv command: %w", err)
		}
		r.s.KVCLI = "`go build ./cmd/kv` in " + root + " (this checkout's main module), commit above"
	}
	if boltCLI != "" {
		r.boltCLI, r.s.BoltCLI = boltCLI, "given with -bbolt-cli: "+boltCLI
		return nil
	}
	version, err := goOutput("", nil, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/bbolt")
	if err != nil {
		return fmt.Errorf("finding bbolt's version: %w", err)
	}
	if err := r.buildBolt(bin); err != nil {
		r.s.BoltCLI = fmt.Sprintf("bbolt's command (go.etcd.io/bbolt/cmd/bbolt %s) could not be built (%v): its row is this program's one-shot bbolt child (read-only open, one Get, close) instead", version, err)
		r.s.BoltChild = true
		r.progress("%s", r.s.BoltCLI)
		return nil
	}
	r.s.BoltCLI = fmt.Sprintf("go.etcd.io/bbolt/cmd/bbolt %s (bench/go.mod's version), built from the module cache with the bench module's dependency versions (a copy of bench/go.mod with `-mod=mod`, which adds cobra); `bbolt get` opens the file read-only", version)
	return nil
}

// buildBolt builds go.etcd.io/bbolt/cmd/bbolt at the version bench/go.mod
// requires into bin. The bench module does not require the command's
// dependencies (cobra): it builds against a copy of go.mod and go.sum
// with -mod=mod, which may add them to the copy, never to bench/go.mod.
func (r *runner) buildBolt(bin string) error {
	gomod, err := goOutput("", nil, "env", "GOMOD")
	if err != nil {
		return err
	}
	if gomod == "" || gomod == os.DevNull {
		return errors.New("not in a module")
	}
	tmp := filepath.Join(bin, "mod")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(gomod), f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			return err
		}
	}
	out := filepath.Join(bin, "bbolt")
	if _, err := goOutput(filepath.Dir(gomod), []string{"GOFLAGS=-mod=mod"}, "build", "-modfile="+filepath.Join(tmp, "go.mod"), "-o", out, "go.etcd.io/bbolt/cmd/bbolt"); err != nil {
		return err
	}
	r.boltCLI = out
	return nil
}

// goOutput runs the go command in dir and returns its trimmed output.
func goOutput(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// round runs one round of every step.
func (r *runner) round(round int) error {
	// Rotate the order, so that no engine always runs first.
	order := slices.Clone(engines)
	for range round {
		order = append(order[1:], order[0])
	}
	res := r.s.Results
	// kv's warm reopen takes about a tenth of a millisecond: one
	// process's figure is at the mercy of a timer tick or another
	// process, so the round's is the median of several, each right
	// after its own warm-up (as the step has always run), the engines
	// interleaved and rotated by run.
	reopens := map[string][]metrics{}
	for n := range max(r.c.ReopenRuns, 1) {
		for j := range order {
			e := order[(j+n)%len(order)]
			if err := r.warm(e); err != nil {
				return err
			}
			m, err := r.child(task{Name: "reopen", Engine: e, Dir: r.dir(e), Keys: r.c.Keys})
			if err != nil {
				return err
			}
			reopens[e] = append(reopens[e], m)
			r.progress("round %d: %s: reopen %d, warm: %v", round+1, e, n+1, m)
		}
	}
	for _, e := range order {
		ms := reopens[e]
		at := func(name string) float64 {
			v := make([]float64, len(ms))
			for i, m := range ms {
				v[i] = m[name]
			}
			return median(v)
		}
		res.set(round, e, "reopen.warm.s", at("open.s"))
		res.set(round, e, "reopen.warm.rss", at("open.rss"))
		res.set(round, e, "reopen.warm.rssadded", at("open.rssadded"))
		res.set(round, e, "reopen.warm.heap", at("open.heap"))
		res.set(round, e, "heap.open.perkey", at("open.heap")/float64(r.c.Keys))
		res.set(round, e, "get.warm.first.s", at("get1.s"))
	}
	if err := r.reads(round, order); err != nil {
		return err
	}
	if err := r.oneshots(round, order); err != nil {
		return err
	}
	for _, e := range order {
		m, err := r.child(task{Name: "reopen", Engine: e, Dir: r.dir(e), Keys: r.c.Keys, Cold: r.c.Cold})
		if err != nil {
			return err
		}
		res.set(round, e, "reopen.cold.s", m["open.s"])
		res.set(round, e, "reopen.cold.read", m["open.read"])
		res.set(round, e, "get.cold.first.s", m["get1.s"])
		res.set(round, e, "get.cold.first.majflt", m["get1.majflt"])
		res.set(round, e, "get.cold.first.read", m["get1.read"])
		res.set(round, e, "get.cold.first.pages", max(m["get1.majflt"], math.Ceil(m["get1.read"]/4096)))
		r.progress("round %d: %s: reopen, cold: %v", round+1, e, m)
	}
	return nil
}

// reader is a read child that serves slices of timed Gets (serveSlices).
type reader struct {
	e    string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	done bool // waited for
	// gets and secs add up the slices of each kind: "get" and "owned".
	gets, secs map[string]float64
}

// ask has rd run a slice of Gets of kind for d and adds up its answer.
func (rd *reader) ask(kind string, d time.Duration) error {
	if _, err := fmt.Fprintf(rd.in, "%s %d\n", kind, d.Nanoseconds()); err != nil {
		return fmt.Errorf("read on %s: %w", rd.e, err)
	}
	line, err := rd.out.ReadString('\n')
	var gets, secs float64
	if err == nil {
		_, err = fmt.Sscanf(line, "%g %g\n", &gets, &secs)
	}
	if err != nil || secs <= 0 {
		return fmt.Errorf("read on %s: answer %q to a slice of %s: %v", rd.e, line, kind, err)
	}
	rd.gets[kind] += gets
	rd.secs[kind] += secs
	return nil
}

// reads runs the read step: a read child per engine, each started
// after its engine's files are warmed and waited for until its untimed
// warm-up is done; then -get-slices slices of timed Gets from each in
// turn (rotated by slice), GetDur ÷ slices each; then kv's owned Gets,
// in slices too; then each child in turn scans and reports its heap.
// An engine's Gets per second are its Gets over its slices' time.
func (r *runner) reads(round int, order []string) error {
	var readers []*reader
	defer func() {
		for _, rd := range readers {
			if !rd.done {
				rd.cmd.Process.Kill()
				rd.cmd.Wait()
			}
		}
	}()
	for _, e := range order {
		if err := r.warm(e); err != nil {
			return err
		}
		b, err := json.Marshal(task{Name: "read", Engine: e, Dir: r.dir(e), Keys: r.c.Keys, GetDur: r.c.GetDur, Slices: true})
		if err != nil {
			return err
		}
		rd := &reader{e: e, cmd: exec.Command(r.exe, "-child", string(b)), gets: map[string]float64{}, secs: map[string]float64{}}
		rd.cmd.Stderr = os.Stderr
		if rd.in, err = rd.cmd.StdinPipe(); err != nil {
			return err
		}
		out, err := rd.cmd.StdoutPipe()
		if err != nil {
			return err
		}
		rd.out = bufio.NewReader(out)
		if err := rd.cmd.Start(); err != nil {
			return err
		}
		readers = append(readers, rd)
		if line, err := rd.out.ReadString('\n'); line != "ready\n" {
			return fmt.Errorf("read on %s: %q before its slices, not ready: %v", e, line, err)
		}
	}
	n := max(r.c.GetSlices, 1)
	slice := r.c.GetDur / time.Duration(n)
	for i := range n {
		for j := range readers {
			if err := readers[(i+j)%len(readers)].ask("get", slice); err != nil {
				return err
			}
		}
	}
	res := r.s.Results
	for _, rd := range readers {
		if rd.e == "kv" {
			for range n {
				if err := rd.ask("owned", slice); err != nil {
					return err
				}
			}
		}
		rd.in.Close()
		rest, err := io.ReadAll(rd.out)
		werr := rd.cmd.Wait()
		rd.done = true
		if werr != nil {
			return fmt.Errorf("read on %s: %w", rd.e, werr)
		}
		if err != nil {
			return fmt.Errorf("read on %s: %w", rd.e, err)
		}
		var m metrics
		if err := json.Unmarshal(rest, &m); err != nil {
			return fmt.Errorf("read on %s: child output %q: %w", rd.e, rest, err)
		}
		m["get.ops"] = rd.gets["get"] / rd.secs["get"]
		res.set(round, rd.e, "get.warm.ops", m["get.ops"])
		if rd.secs["owned"] > 0 {
			m["getowned.ops"] = rd.gets["owned"] / rd.secs["owned"]
			res.set(round, rd.e, "get.warm.owned.ops", m["getowned.ops"])
		}
		res.set(round, rd.e, "scan.warm.kps", m["scan.kps"])
		res.set(round, rd.e, "scanview.warm.kps", m["scanview.kps"])
		res.set(round, rd.e, "heap.steady.perkey", m["heap"]/float64(r.c.Keys))
		r.progress("round %d: %s: read: %v", round+1, rd.e, m)
	}
	return nil
}

// warm puts engine e's files, this program and the commands in the page
// cache, and records the load average before the step.
func (r *runner) warm(e string) error {
	if l, ok := loadAverage(); ok {
		r.s.Load = append(r.s.Load, l)
	}
	paths := []string{r.dir(e), r.exe, r.kvCLI}
	if r.boltCLI != "" {
		paths = append(paths, r.boltCLI)
	}
	return pagecache.Warm(paths...)
}

// child runs t in a new process of this program and returns its figures.
func (r *runner) child(t task) (metrics, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	if l, ok := loadAverage(); ok && t.Cold != "" {
		r.s.Load = append(r.s.Load, l)
	}
	cmd := exec.Command(r.exe, "-child", string(b)) // the test binary serves too (TestMain)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", t.Name, t.Engine, err)
	}
	var m metrics
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("%s on %s: child output %q: %w", t.Name, t.Engine, out, err)
	}
	return m, nil
}

// gnuTime is GNU time, which measures a command's peak resident set
// (-f %M), or "" where there is none.
var gnuTime = func() string {
	p, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		return ""
	}
	return p
}()

// oneshot is one kind of one-shot process the round times.
type oneshot struct {
	row, engine string
	cmd         func(key []byte, idx int) *exec.Cmd
	check       func(key, out []byte) error
}

// oneshots times the one-shot processes: each command once untimed (so
// that the page cache and the machine's caches hold what it needs), then
// -cli-runs times each, the kinds interleaved and rotated by run, each
// run on another key. The round's figure is the median of the runs.
func (r *runner) oneshots(round int, order []string) error {
	for _, e := range engines {
		if err := r.warm(e); err != nil {
			return err
		}
	}
	var kinds []oneshot
	kinds = append(kinds, oneshot{"cli", "kv",
		func(key []byte, _ int) *exec.Cmd {
			return exec.Command(r.kvCLI, r.dir("kv"), "get", "--raw", strconv.Quote(string(key)))
		},
		checkGen0}) // --raw: the value's bytes exactly
	if r.boltCLI != "" {
		kinds = append(kinds, oneshot{"cli", "bbolt",
			func(key []byte, _ int) *exec.Cmd {
				return exec.Command(r.boltCLI, "get", "--parse-format", "hex", "--format", "bytes",
					filepath.Join(r.dir("bbolt"), boltFile), string(boltBucket), hex.EncodeToString(key))
			},
			checkBoltOutput})
	}
	for _, e := range order {
		kinds = append(kinds, oneshot{"oneshot", e,
			func(_ []byte, idx int) *exec.Cmd {
				b, _ := json.Marshal(task{Name: "oneshot", Engine: e, Dir: r.dir(e), Keys: r.c.Keys, Key: idx})
				return exec.Command(r.exe, "-child", string(b))
			},
			checkOneshotOutput})
	}
	times := map[[2]string][]float64{}
	var k [keySize]byte
	// n = -1 is the untimed run, through GNU time when there is one: its
	// peak resident set. A process started directly from this one would
	// report this one's instead (the kernel carries the peak of the
	// address space a vfork child shares into the child's at exec).
	for n := -1; n < r.c.CLIRuns; n++ {
		if l, ok := loadAverage(); ok && n >= 0 {
			r.s.Load = append(r.s.Load, l)
		}
		for j := range kinds {
			o := kinds[(j+max(n, 0))%len(kinds)]
			idx := randomKey(1_000_000+round*1000+n*len(kinds)+j, r.c.Keys)
			key := dataset.Key(k[:], idx)
			cmd := o.cmd(key, idx)
			rssFile := ""
			if n < 0 && gnuTime != "" {
				rssFile = filepath.Join(r.base, "bin", "maxrss")
				cmd = exec.Command(gnuTime, append([]string{"-f", "%M", "-o", rssFile}, cmd.Args...)...)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			d := time.Since(start).Seconds()
			if err != nil {
				return fmt.Errorf("%s %s: %v: %w: %s", o.row, o.engine, cmd.Args, err, strings.TrimSpace(stderr.String()))
			}
			if err := o.check(key, stdout.Bytes()); err != nil {
				return fmt.Errorf("%s %s: %v: %w", o.row, o.engine, cmd.Args, err)
			}
			if rssFile != "" {
				b, err := os.ReadFile(rssFile)
				if err != nil {
					return err
				}
				kb, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
				if err != nil {
					return fmt.Errorf("%s -f %%M: %q: %w", gnuTime, b, err)
				}
				r.s.Results.set(round, o.engine, o.row+".get.maxrss", kb*1024)
			}
			if n >= 0 {
				id := [2]string{o.row, o.engine}
				times[id] = append(times[id], d)
			}
		}
	}
	for id, ts := range times {
		r.s.Results.set(round, id[1], id[0]+".get.s", median(ts))
	}
	if r.boltCLI == "" {
		// The fallback: bbolt's command is the one-shot child.
		for _, id := range []string{"get.s", "get.maxrss"} {
			if v, ok := r.s.Results[round]["bbolt"]["oneshot."+id]; ok {
				r.s.Results.set(round, "bbolt", "cli."+id, v)
			}
		}
	}
	r.progress("round %d: one-shot: %v", round+1, times)
	return nil
}

// checkBoltOutput fails unless out is what `bbolt get --format bytes`
// prints for key: its value and a newline.
func checkBoltOutput(key, out []byte) error {
	v, ok := bytes.CutSuffix(out, []byte("\n"))
	if !ok {
		return fmt.Errorf("bbolt get: no newline after the value %q", out)
	}
	return dataset.CheckAt(key, v, 0)
}

// checkOneshotOutput fails unless a one-shot child printed nothing: it
// checks its value itself and fails when it is wrong.
func checkOneshotOutput(_, out []byte) error {
	if len(out) > 0 {
		return fmt.Errorf("one-shot child printed %q", out)
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// loadAverage returns the machine's 1-minute load average.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	var l float64
	_, err = fmt.Sscan(string(b), &l)
	return l, err == nil
}

// dirBytes returns the bytes of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// reportSaved prints the report of a run saved with -json.
func reportSaved(name, out string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s.Rendered = runinfo.Collect("./cmd/openbench", ".").Commit
	return writeReport(s, out)
}

// writeReport checks the report has every row, prints it on stdout and,
// if out is set, writes it there too.
func writeReport(s saved, out string) error {
	var buf bytes.Buffer
	report(&buf, s)
	if _, err := os.Stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	if out != "" {
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return checkReport(buf.String())
}

// checkGen0 fails unless v is the data set's value of key (generation 0,
// the only one this benchmark writes).
func checkGen0(key, v []byte) error { return dataset.CheckAt(key, v, 0) }
