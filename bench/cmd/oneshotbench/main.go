// Command oneshotbench measures kv as shell scripts use it: a process per
// write, many such processes at once on one data directory, against the
// sqlite3 command line on one database (WAL, synchronous=FULL, a busy
// timeout, a process per write too); and a one-shot lock cycle, kv DIR
// lock NAME -- true, against flock(1)'s flock FILE true. Rounds
// interleave the engines, so that each ratio is taken within a round.
//
//	go run ./cmd/oneshotbench                    # 3 rounds
//	go run ./cmd/oneshotbench -out results/NAME.md
//	go run ./cmd/oneshotbench -short             # a smoke run: every row once, tiny
//
// What it measures, per round:
//
//   - one-shot writers, P processes (1, 4, 16) at once, each running N
//     writes one after another, each write a process of its own: kv DIR
//     put KEY VALUE (its default 10 s wait for the writer's lock) against
//     sqlite3 -cmd '.timeout 10000' DB "PRAGMA synchronous=FULL; INSERT OR
//     REPLACE ..." on a database in WAL mode. The figure is writes per
//     second of wall time; every write must succeed.
//   - one-shot lock cycle: kv DIR lock NAME -- true, one after another,
//     against flock FILE true; the figure is the time of one cycle.
//
// It needs sqlite3 and flock on PATH (Debian's sqlite3 and util-linux),
// and builds kv from the module above.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvstore/kv/bench/internal/runinfo"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds, each running every engine")
	perProc := flag.Int("writes", 40, "one-shot writes per process")
	cycles := flag.Int("cycles", 100, "one-shot lock cycles per round")
	short := flag.Bool("short", false, "a smoke run: 1 round, 2 writes per process, 5 cycles")
	out := flag.String("out", "", "also write the report, headed by the run's date, commit, command and machine, to this file")
	flag.Parse()
	if *short {
		*rounds, *perProc, *cycles = 1, 2, 5
	}
	tmp, err := os.MkdirTemp("", "oneshotbench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	r := &runner{tmp: tmp}
	if err := r.setup(); err != nil {
		fail(err)
	}
	var report bytes.Buffer
	if err := r.run(&report, *rounds, *perProc, *cycles); err != nil {
		fail(err)
	}
	os.Stdout.Write(report.Bytes())
	if *out != "" {
		info := runinfo.Collect("./cmd/oneshotbench", tmp)
		body := "# oneshotbench\n\n" + info.Markdown() + "\n" + report.String()
		if err := os.WriteFile(*out, []byte(body), 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "oneshotbench:", err)
	os.Exit(1)
}

type runner struct {
	tmp     string
	kv      string // the kv binary
	sqlite3 string
	flock   string
	n       int // a counter for fresh directories
}

// setup builds kv and finds sqlite3 and flock.
func (r *runner) setup() error {
	var err error
	if r.sqlite3, err = exec.LookPath("sqlite3"); err != nil {
		return fmt.Errorf("sqlite3 is not installed (apt-get install sqlite3): %w", err)
	}
	if r.flock, err = exec.LookPath("flock"); err != nil {
		return fmt.Errorf("flock(1) is not installed (util-linux): %w", err)
	}
	// kv is built in its own module (the one bench's go.mod replaces
	// it with), whose go.sum has kv's dependencies.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kvstore/kv").Output()
	if err != nil {
		return fmt.Errorf("go list -m github.com/kvstore/kv: %w", err)
	}
	// Built as README's install line builds it: CGO_ENABLED=0, a static
	// binary, which starts about a millisecond sooner than one that loads
	// the C library for package net's resolver (which kv never uses).
	r.kv = filepath.Join(r.tmp, "kv")
	cmd := exec.Command("go", "build", "-o", r.kv, "./cmd/kv")
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build kv: %v: %s", err, b)
	}
	return nil
}

func (r *runner) fresh() string {
	r.n++
	return filepath.Join(r.tmp, fmt.Sprint("d", r.n))
}

// engine is one side of a row: prepare makes its store, write runs one
// one-shot write.
type engine struct {
	name    string
	prepare func(dir string) error
	write   func(dir string, proc, i int) error
}

func (r *runner) engines() []engine {
	return []engine{
		{
			name: "kv",
			prepare: func(dir string) error {
				return runCmd(r.kv, dir, "put", "--create", "init", "1")
			},
			write: func(dir string, p, i int) error {
				return runCmd(r.kv, dir, "put", fmt.Sprintf("p%02dk%04d", p, i), "value")
			},
		},
		{
			name: "sqlite3",
			prepare: func(dir string) error {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				return runCmd(r.sqlite3, filepath.Join(dir, "db"),
					"PRAGMA journal_mode=WAL; CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT);")
			},
			write: func(dir string, p, i int) error {
				return runCmd(r.sqlite3, "-cmd", ".timeout 10000", filepath.Join(dir, "db"),
					fmt.Sprintf("PRAGMA synchronous=FULL; INSERT OR REPLACE INTO t VALUES ('p%02dk%04d', 'value');", p, i))
			},
		},
	}
}

// runCmd runs a command, and returns its error with its output.
func runCmd(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(b))
	}
	return nil
}

// writers runs procs processes of perProc one-shot writes each and
// returns the writes per second of wall time.
func (r *runner) writers(e engine, procs, perProc int) (float64, error) {
	dir := r.fresh()
	if err := e.prepare(dir); err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	start := time.Now()
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProc {
				if err := e.write(dir, p, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return 0, fmt.Errorf("%s, %d processes: %w", e.name, procs, err)
	}
	return float64(procs*perProc) / elapsed.Seconds(), nil
}

// lockCycles times n one-shot lock cycles of kv and of flock(1), and
// returns the time of one cycle of each.
func (r *runner) lockCycles(n int) (kvCycle, flockCycle time.Duration, err error) {
	dir := r.fresh()
	if err := runCmd(r.kv, dir, "put", "--create", "init", "1"); err != nil {
		return 0, 0, err
	}
	lockFile := filepath.Join(r.tmp, "flockfile")
	start := time.Now()
	for range n {
		if err := runCmd(r.kv, dir, "lock", "job", "--", "true"); err != nil {
			return 0, 0, err
		}
	}
	kvCycle = time.Since(start) / time.Duration(n)
	start = time.Now()
	for range n {
		if err := runCmd(r.flock, lockFile, "true"); err != nil {
			return 0, 0, err
		}
	}
	flockCycle = time.Since(start) / time.Duration(n)
	return kvCycle, flockCycle, nil
}

// run makes the rounds and writes the table: each row's figures per
// engine (median over the rounds) and kv's ratio, with its range over
// the rounds.
func (r *runner) run(w io.Writer, rounds, perProc, cycles int) error {
	procCounts := []int{1, 4, 16}
	type row struct{ kv, peer, ratio []float64 }
	rows := make([]row, len(procCounts))
	var lock row
	engines := r.engines()
	for round := range rounds {
		for i, p := range procCounts {
			// The engines in turn, the first alternating by round.
			order := slices.Clone(engines)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			rate := map[string]float64{}
			for _, e := range order {
				v, err := r.writers(e, p, perProc)
				if err != nil {
					return err
				}
				rate[e.name] = v
			}
			rows[i].kv = append(rows[i].kv, rate["kv"])
			rows[i].peer = append(rows[i].peer, rate["sqlite3"])
			rows[i].ratio = append(rows[i].ratio, rate["kv"]/rate["sqlite3"])
		}
		k, f, err := r.lockCycles(cycles)
		if err != nil {
			return err
		}
		lock.kv = append(lock.kv, float64(k.Microseconds()))
		lock.peer = append(lock.peer, float64(f.Microseconds()))
		lock.ratio = append(lock.ratio, float64(k)/float64(f))
		fmt.Fprintf(os.Stderr, "oneshotbench: round %d of %d done\n", round+1, rounds)
	}
	fmt.Fprintf(w, "%d rounds; %d one-shot writes per process; %d lock cycles per round. Medians over the rounds; the ratio's range is its lowest and highest round.\n\n", rounds, perProc, cycles)
	fmt.Fprintln(w, "| row | kv | peer | kv ÷ peer (range) |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for i, p := range procCounts {
		fmt.Fprintf(w, "| oneshot.put.p%d (writes/s; peer: sqlite3) | %.0f | %.0f | %.2f× (%.2f–%.2f) |\n",
			p, median(rows[i].kv), median(rows[i].peer), median(rows[i].ratio), slices.Min(rows[i].ratio), slices.Max(rows[i].ratio))
	}
	fmt.Fprintf(w, "| oneshot.lock.cycle (µs; peer: flock(1)) | %.0f | %.0f | %.2f× (%.2f–%.2f) |\n",
		median(lock.kv), median(lock.peer), median(lock.ratio), slices.Min(lock.ratio), slices.Max(lock.ratio))
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
