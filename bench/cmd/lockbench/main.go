// Command lockbench measures package filelock against
// github.com/gofrs/flock, a kernel lock with no tokens and no durable
// state: the open time, and the acquire+release cycle of 1 process and
// of 16 processes contending for one lock. Each contended figure runs in
// child processes (the program re-runs itself), and rounds interleave the
// two engines, so that their ratio is taken within a round.
//
//	go run ./cmd/lockbench              # 5 rounds
//	go run ./cmd/lockbench -out results/NAME.md   # a results file: the run (commit, command, machine) and the table
//	go run ./cmd/lockbench -rounds 1 -cycles 100
//
// What it measures, per round:
//
//   - store open: opening and closing the lock's kv store for writing,
//     which every lock operation of a short-lived process pays, against
//     open(2)+close(2) of the flock file, which gofrs/flock does at each
//     Lock after an Unlock.
//   - Open: filelock.Open of an existing directory (no store I/O), against
//     flock.New.
//   - cycle, 1 process: Acquire+Release with filelock.Open (two store
//     opens, two fdatasyncs), the same with kv's default store options
//     (log preallocated, checkpoints every 64 MiB of log), and with
//     filelock.New on a store kept open (two fdatasyncs), against
//     Lock+Unlock.
//   - cycle, 16 processes: the wall time of 16 processes doing N cycles
//     each on one lock, divided by the 16·N cycles, and the longest wait
//     any of them had for the lock.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/kvstore/kv/bench/internal/runinfo"
	"github.com/kvstore/kv/bench/internal/units"
	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
)

func main() {
	child := flag.String("child", "", "")
	dir := flag.String("dir", "", "directory for the stores (default: a temporary one, removed at the end)")
	rounds := flag.Int("rounds", 5, "rounds, each running every engine")
	cycles := flag.Int("cycles", 200, "cycles of the 1-process runs")
	procs := flag.Int("procs", 16, "contending processes")
	perProc := flag.Int("per-proc", 10, "cycles of each contending process")
	opens := flag.Int("opens", 200, "opens timed per round")
	out := flag.String("out", "", "also write the report, headed by the run's date, commit, command and machine, to this file")
	flag.Parse()
	if *child != "" {
		if err := runChild(*child, *dir, *perProc); err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*dir, *rounds, *cycles, *procs, *perProc, *opens, *out); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// figures of one round, in seconds per operation.
type round map[string]float64

func run(base string, rounds, cycles, procs, perProc, opens int, out string) error {
	if base == "" {
		d, err := os.MkdirTemp("", "lockbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		base = d
	}
	// The run is described as it starts: the commit is the code that ran.
	info := runinfo.Collect("./cmd/lockbench", base)
	var rs []round
	for r := range rounds {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", r+1, rounds)
		dir := filepath.Join(base, fmt.Sprintf("r%d", r))
		kvDir, flockFile := filepath.Join(dir, "kv"), filepath.Join(dir, "flock.lock")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		l, err := filelock.Open(kvDir)
		if err != nil {
			return err
		}
		rd := round{}
		// store open vs open(2)+close(2)
		so := filelock.DefaultStoreOptions
		rd["kv store open"] = timeEach(opens, func() error {
			s, err := kv.Open(kvDir, &so)
			if err != nil {
				return err
			}
			return s.Close()
		})
		rd["flock file open"] = timeEach(opens, func() error {
			f, err := os.OpenFile(flockFile, os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				return err
			}
			return f.Close()
		})
		rd["kv Open"] = timeEach(opens, func() error { _, err := filelock.Open(kvDir); return err })
		rd["flock New"] = timeEach(opens, func() error { flock.New(flockFile); return nil })
		// one process
		ctx := context.Background()
		rd["kv cycle (Open)"] = timeEach(cycles, func() error {
			h, err := l.Acquire(ctx, "job")
			if err != nil {
				return err
			}
			return h.Release()
		})
		ld, err := filelock.Open(filepath.Join(dir, "kv-defaults"), filelock.WithStoreOptions(kv.Options{}))
		if err != nil {
			return err
		}
		rd["kv cycle (Open, kv defaults)"] = timeEach(cycles/4, func() error {
			h, err := ld.Acquire(ctx, "job")
			if err != nil {
				return err
			}
			return h.Release()
		})
		s, err := kv.Open(kvDir, nil)
		if err != nil {
			return err
		}
		ln, err := filelock.New(s)
		if err != nil {
			return err
		}
		rd["kv cycle (New)"] = timeEach(cycles, func() error {
			h, err := ln.Acquire(ctx, "job")
			if err != nil {
				return err
			}
			return h.Release()
		})
		s.Close()
		fl := flock.New(flockFile)
		rd["flock cycle"] = timeEach(cycles, func() error {
			if err := fl.Lock(); err != nil {
				return err
			}
			return fl.Unlock()
		})
		// contended
		for _, eng := range []string{"kv", "flock"} {
			target := kvDir
			if eng == "flock" {
				target = flockFile
			}
			per, longest, err := contend(eng, target, procs, perProc)
			if err != nil {
				return err
			}
			rd[eng+" cycle, contended"] = per
			rd[eng+" longest wait, contended"] = longest
		}
		for _, v := range rd {
			if v < 0 {
				return fmt.Errorf("a run failed")
			}
		}
		rs = append(rs, rd)
	}
	report(os.Stdout, rs, procs, perProc)
	if out == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# lockbench results\n\n%s\n", info.Markdown())
	report(&b, rs, procs, perProc)
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// timeEach returns the mean seconds of f over n calls, or -1 if one
// failed.
func timeEach(n int, f func() error) float64 {
	start := time.Now()
	for range n {
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			return -1
		}
	}
	return time.Since(start).Seconds() / float64(n)
}

// contend runs procs children of engine eng on one lock, starts them at
// once, and returns the wall time per cycle and the longest wait.
func contend(eng, target string, procs, perProc int) (float64, float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	type kid struct {
		cmd *exec.Cmd
		in  *os.File
		out *bufio.Scanner
	}
	var kids []kid
	for range procs {
		c := exec.Command(self, "-child", eng, "-dir", target, "-per-proc", strconv.Itoa(perProc))
		in, err := c.StdinPipe()
		if err != nil {
			return 0, 0, err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			return 0, 0, err
		}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return 0, 0, err
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "ready" {
			return 0, 0, fmt.Errorf("%s child: no ready line", eng)
		}
		kids = append(kids, kid{c, in.(*os.File), sc})
	}
	start := time.Now()
	for _, k := range kids {
		k.in.WriteString("go\n")
	}
	longest := 0.0
	for _, k := range kids {
		if !k.out.Scan() {
			return 0, 0, fmt.Errorf("%s child: no result", eng)
		}
		us, err := strconv.ParseFloat(strings.TrimPrefix(k.out.Text(), "longest "), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s child: %q", eng, k.out.Text())
		}
		longest = max(longest, us/1e6)
		if err := k.cmd.Wait(); err != nil {
			return 0, 0, err
		}
	}
	return time.Since(start).Seconds() / float64(procs*perProc), longest, nil
}

// runChild is one contending process: it says ready, waits for "go",
// does n cycles and prints its longest wait in microseconds.
func runChild(eng, target string, n int) error {
	var cycle func() error
	switch eng {
	case "kv":
		l, err := filelock.Open(target)
		if err != nil {
			return err
		}
		cycle = func() error {
			h, err := l.Acquire(context.Background(), "job")
			if err != nil {
				return err
			}
			return h.Release()
		}
	case "flock":
		fl := flock.New(target)
		cycle = func() error {
			if err := fl.Lock(); err != nil {
				return err
			}
			return fl.Unlock()
		}
	default:
		return fmt.Errorf("unknown engine %q", eng)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	var longest time.Duration
	for range n {
		t0 := time.Now()
		if err := cycle(); err != nil {
			return err
		}
		longest = max(longest, time.Since(t0))
	}
	fmt.Printf("longest %d\n", longest.Microseconds())
	return nil
}

// report writes the table of medians and per-round ratios.
func report(w io.Writer, rs []round, procs, perProc int) {
	med := func(name string) (float64, float64, float64) {
		var v []float64
		for _, r := range rs {
			v = append(v, r[name])
		}
		slices.Sort(v)
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	ratio := func(a, b string) (float64, float64, float64) {
		var v []float64
		for _, r := range rs {
			v = append(v, r[a]/r[b])
		}
		slices.Sort(v)
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	fmt.Fprintf(w, "## filelock against gofrs/flock: %d round(s); %d contending processes, %d cycles each\n\n", len(rs), procs, perProc)
	fmt.Fprintln(w, "| | filelock | gofrs/flock | ratio (median, range) |")
	fmt.Fprintln(w, "|---|---|---|---|")
	rows := []struct{ label, a, b string }{
		{"store open (each lock operation of a short-lived process)", "kv store open", "flock file open"},
		{"Open / New", "kv Open", "flock New"},
		{"acquire+release, 1 process, Open", "kv cycle (Open)", "flock cycle"},
		{"acquire+release, 1 process, Open with kv's default store options", "kv cycle (Open, kv defaults)", "flock cycle"},
		{"acquire+release, 1 process, New (store kept open)", "kv cycle (New)", "flock cycle"},
		{fmt.Sprintf("acquire+release, %d processes (wall time / cycles)", procs), "kv cycle, contended", "flock cycle, contended"},
		{fmt.Sprintf("longest wait, %d processes", procs), "kv longest wait, contended", "flock longest wait, contended"},
	}
	for _, r := range rows {
		a, _, _ := med(r.a)
		b, _, _ := med(r.b)
		m, lo, hi := ratio(r.a, r.b)
		fmt.Fprintf(w, "| %s | %s | %s | %.1f× (%.1f–%.1f×) |\n", r.label, units.Dur(a), units.Dur(b), m, lo, hi)
	}
}
