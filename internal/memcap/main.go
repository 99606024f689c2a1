// Command memcap runs a test binary under a ceiling on its resident
// memory, for go test -exec:
//
//	go build -o /tmp/memcap ./internal/memcap
//	MEMCAP_CEILING=1GiB MEMCAP_LOG=/tmp/peaks go test -exec /tmp/memcap ./...
//
// go test runs each package's test binary as "memcap BINARY ARGS...", in
// the package's directory. memcap starts the binary, samples its resident
// memory (VmRSS in /proc/PID/status) every 50 ms while it runs, and reads
// its peak (ru_maxrss from wait4, which also covers the largest process
// the binary itself started and waited for) when it exits. A binary that
// goes over the ceiling while it runs gets SIGQUIT, so that its goroutine
// stacks show what held the memory, and SIGKILL 5 s later; one found over
// it at exit fails too. Either way memcap prints, on standard error, the
// package, its peak and the ceiling, and exits 1, which go test reports
// as that package's FAIL.
//
// The sampling is what keeps a runaway test from taking the machine with
// it: a binary that grows to 20 GiB is stopped near the ceiling, instead
// of at the kernel's OOM killer, which may choose another process.
//
// Environment:
//
//	MEMCAP_CEILING  the ceiling: a byte count, or a number with KiB, MiB or
//	                GiB (default 1GiB)
//	MEMCAP_LOG      a file to which each run appends a line: the package's
//	                import path, its peak in bytes, its wall time in
//	                seconds and its exit status, tab-separated
//	MEMCAP_LABEL    a word shown after the package's path, in the log and
//	                in messages (as "race" for a run with -race)
//
// SIGINT, SIGTERM and SIGQUIT sent to memcap (go test's own timeout sends
// SIGQUIT) are passed on to the binary. Off Linux there is no VmRSS to
// sample: the peak is ru_maxrss at exit alone.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// defaultCeiling is the ceiling without MEMCAP_CEILING.
const defaultCeiling = 1 << 30

// sampleEvery is how often a running binary's resident memory is read.
const sampleEvery = 50 * time.Millisecond

// killAfter is how long a binary stopped for its memory has, after its
// SIGQUIT, to print its stacks and exit before it is killed.
const killAfter = 5 * time.Second

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: memcap TESTBINARY [ARGS...] (for go test -exec; see go doc ./internal/memcap)")
		os.Exit(2)
	}
	ceiling := int64(defaultCeiling)
	if s := os.Getenv("MEMCAP_CEILING"); s != "" {
		c, err := parseSize(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "memcap: MEMCAP_CEILING: %v\n", err)
			os.Exit(2)
		}
		ceiling = c
	}
	wd, _ := os.Getwd()
	pkg := packagePath(wd)
	if l := os.Getenv("MEMCAP_LABEL"); l != "" {
		pkg += " (" + l + ")"
	}
	res, err := run(os.Args[1], os.Args[2:], ceiling, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "memcap: %s: %v\n", pkg, err)
		os.Exit(1)
	}
	if log := os.Getenv("MEMCAP_LOG"); log != "" {
		if err := appendLog(log, pkg, res); err != nil {
			fmt.Fprintf(os.Stderr, "memcap: %v\n", err)
		}
	}
	if res.over {
		fmt.Fprintf(os.Stderr, "memcap: %s: peak resident memory %s is over the ceiling of %s (MEMCAP_CEILING)%s\n",
			pkg, formatSize(res.peak), formatSize(ceiling), res.how())
		os.Exit(1)
	}
	os.Exit(res.code)
}

// result is what run saw of one binary.
type result struct {
	peak    int64         // bytes: the larger of the sampled VmRSS and ru_maxrss
	over    bool          // the peak went over the ceiling
	stopped bool          // memcap stopped the binary for it while it ran
	code    int           // the binary's exit code, or 128+signal
	elapsed time.Duration // wall time of the binary
}

func (r result) how() string {
	if r.stopped {
		return ": stopped while it ran"
	}
	return ""
}

// run runs bin with args under the ceiling, with memcap's standard
// input and stdout and stderr as its output, and returns once it has
// exited.
func run(bin string, args []string, ceiling int64, stdout, stderr io.Writer) (result, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	pid := cmd.Process.Pid
	var sampled atomic.Int64
	var stopped atomic.Bool
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		var killAt <-chan time.Time
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-killAt:
				_ = cmd.Process.Kill()
				killAt = nil
			case <-tick.C:
				rss, ok := residentBytes(pid)
				if !ok {
					continue
				}
				if rss > sampled.Load() {
					sampled.Store(rss)
				}
				if rss > ceiling && !stopped.Load() {
					stopped.Store(true)
					fmt.Fprintf(stderr, "memcap: resident memory %s is over the ceiling of %s: stopping the test binary (SIGQUIT prints its goroutines)\n",
						formatSize(rss), formatSize(ceiling))
					_ = cmd.Process.Signal(syscall.SIGQUIT)
					killAt = time.After(killAfter)
				}
			}
		}
	}()
	werr := cmd.Wait()
	close(done)
	res := result{elapsed: time.Since(start), stopped: stopped.Load(), peak: sampled.Load()}
	if ps := cmd.ProcessState; ps != nil {
		if m := maxRSS(ps); m > res.peak {
			res.peak = m
		}
		res.code = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.code = 128 + int(ws.Signal())
		}
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return res, werr
	}
	res.over = res.stopped || res.peak > ceiling
	return res, nil
}

// residentBytes reads VmRSS of pid from /proc, and reports whether it
// could (not off Linux, nor once the process has exited).
func residentBytes(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, false
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n << 10, err == nil
		}
	}
	return 0, false
}

// packagePath names the package whose directory dir is: the module path
// from the nearest go.mod above it, joined with dir's path below that.
// Without a go.mod it is dir itself.
func packagePath(dir string) string {
	for d := dir; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			for line := range strings.SplitSeq(string(b), "\n") {
				if mod, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					rel, err := filepath.Rel(d, dir)
					if err != nil || rel == "." {
						return strings.TrimSpace(mod)
					}
					return strings.TrimSpace(mod) + "/" + filepath.ToSlash(rel)
				}
			}
			return dir
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

func appendLog(path, pkg string, r result) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\t%d\t%.1f\t%d\n", pkg, r.peak, r.elapsed.Seconds(), r.code)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// parseSize reads a byte count: digits, optionally followed by KiB, MiB
// or GiB.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (a byte count, or a number with KiB, MiB or GiB)", s)
	}
	return n * mult, nil
}

// formatSize prints a byte count in MiB, or GiB from 10 GiB up.
func formatSize(n int64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
