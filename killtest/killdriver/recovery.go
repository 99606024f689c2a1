package killdriver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
)

// Progress is the state of a kill-driver run, reported after every
// run.
type Progress struct {
	Done, Total int
	Killed, Bad int
}

// RecoveryOptions configure Recovery. Only Binary is required;
// the zero value of every other field is the article's setting or sized
// from this machine.
type RecoveryOptions struct {
	// Binary is the path of the kv binary to run.
	Binary string
	// Runs is the number of kills; 0 means 500.
	Runs int
	// Ops is the size of the workload, at least 17; 0 means the article's
	// 17 operations (add c 1 ... add c 10, put k1 v1 ... put k5 v5,
	// del k3, add d 7) in one segment. More operations come first, as
	// pairs of an add and a 1 KiB put that fill a segment each, so that
	// the article's operations stay together in the last segment and the
	// recovery has that many more segments to read and delete.
	Ops int
	// MinDelay and MaxDelay bound the random delay between the start of
	// the recovery and SIGKILL. With MaxDelay 0 the window is sized from
	// this machine and follows its load: from 0.8 times the time at which
	// recent complete recoveries started to change the directory (unless
	// MinDelay is given) to a tenth past their time to the end, so that
	// most runs are killed, many of them while recovery writes. (The
	// article's fixed window of 0 to 5 ms fits a machine on which the
	// binary starts at once; where the start-up of the Go binary alone
	// takes longer than that, a fixed window would kill only start-ups.
	// bench/RESULTS.md has the figures.)
	MinDelay, MaxDelay time.Duration
	// Bug is the bug variant that both recoveries of every run use.
	Bug string
	// Seed replays the random choices of an earlier run (where in its
	// window each delay falls); 0 picks one.
	Seed uint64
	// Dir is where the work directory is made; "" means os.TempDir.
	Dir string
	// Keep keeps the work directory (the prepared directory and every
	// run's) even when every run went well.
	Keep bool
	// StopAfterBad stops after this many bad outcomes; 0 runs them all.
	StopAfterBad int
	// Progress, when set, is called after every run; Note with each line
	// worth showing before the report (the seed, the prepared directory).
	Progress func(Progress)
	Note     func(string)
}

// padValue is the size of a filler put: one fills a padSegment.
const (
	padValue   = 1024
	padSegment = 1024
)

// recoveryOps is the workload of n operations: fillers, then the
// article's 17.
func recoveryOps(n int) []string {
	var ops []string
	for i := 0; i < n-17; i++ {
		if i%2 == 0 {
			ops = append(ops, fmt.Sprintf("add e%d %d", i/2%4, i/2+1))
		} else {
			ops = append(ops, "put pad "+strings.Repeat(string(rune('a'+i/2%26)), padValue))
		}
	}
	return append(ops, opmodel.Article()...)
}

// replay is the history of the map that ops, op lines, make when each
// commits one record, as kv load commits them.
func replay(ops []string) (*opmodel.History, error) {
	parsed, err := opmodel.Parse(ops)
	if err != nil {
		return nil, fmt.Errorf("killdriver: the workload: %w", err)
	}
	h, err := opmodel.Replay(parsed)
	if err != nil {
		return nil, fmt.Errorf("killdriver: the workload: %w", err)
	}
	return h, nil
}

// prepare writes ops into the new directory dir with "kv DIR load --ack",
// one at a time: each is written only after the previous one was
// acknowledged, so that each is its own group commit and its own record
// append, and segments rotate where the sizes say, not where the group
// commit happened to cut.
func prepare(ctx context.Context, binary string, dir string, ops []string, flags ...string) error {
	args := append(append([]string{}, flags...), dir, "load", "--ack")
	cmd := command(ctx, binary, "", args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	var ferr error
	for i, op := range ops {
		if _, err := io.WriteString(in, op+"\n"); err != nil {
			ferr = err
			break
		}
		if !sc.Scan() {
			ferr = fmt.Errorf("no ack for operation %d", i+1)
			break
		}
		if want := fmt.Sprintf("ack %d", i+1); sc.Text() != want {
			ferr = fmt.Errorf("got %q, want %q", sc.Text(), want)
			break
		}
	}
	in.Close()
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("killdriver: preparing %s: %w", dir, procError(err, stderr.String()))
	}
	if ferr != nil {
		return fmt.Errorf("killdriver: preparing %s: %w", dir, ferr)
	}
	return nil
}

// segments reads the record count of each segment of dir with
// "kv DIR stat --json".
func segments(ctx context.Context, binary, dir string) ([]int, error) {
	out, _, err := runToEnd(command(ctx, binary, "", dir, "stat", "--json"))
	if err != nil {
		return nil, err
	}
	var st struct {
		Snapshot *json.RawMessage `json:"snapshot"`
		Segments []struct {
			Records int `json:"records"`
		} `json:"segments"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("killdriver: kv stat --json: %w", err)
	}
	if st.Snapshot != nil {
		return nil, fmt.Errorf("killdriver: %s has a snapshot; the workload needs a log to replay", dir)
	}
	recs := make([]int, len(st.Segments))
	for i, s := range st.Segments {
		recs[i] = s.Records
	}
	return recs, nil
}

// makeWorkDir makes the work directory.
func makeWorkDir(parent string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
	}
	return os.MkdirTemp(parent, "kv-killtest-")
}

func pickSeed(seed uint64) uint64 {
	for seed == 0 {
		seed = rand.Uint64() >> 11 // short enough to type
	}
	return seed
}

// ceilMillis rounds d up to a whole millisecond.
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// median is the median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Recovery kills recoveries, as the article does. It prepares a data
// directory holding the workload in log segments and no snapshot, and
// finds the map of a recovery without a crash (kv DIR dump on a copy).
// Then, for each run, it copies the prepared directory, starts
// "kv COPY dump", sends SIGKILL after a random delay, notes whether the
// signal ended it or it had already finished, runs "kv COPY dump" again
// and compares its map with the expected one.
//
// The error is for a driver that could not do its job (no binary, a
// preparation that failed); what the runs found is in the result.
func Recovery(ctx context.Context, o RecoveryOptions) (*Result, error) {
	if o.Binary == "" {
		return nil, errors.New("killdriver: no kv binary given")
	}
	runs, ops := o.Runs, o.Ops
	if runs <= 0 {
		runs = 500
	}
	if ops == 0 {
		ops = 17
	}
	if ops < 17 {
		return nil, fmt.Errorf("killdriver: --ops %d: the workload holds at least the article's 17 operations", ops)
	}
	if o.MaxDelay < 0 || o.MinDelay < 0 || (o.MaxDelay > 0 && o.MinDelay > o.MaxDelay) {
		return nil, fmt.Errorf("killdriver: delays between %v and %v: want 0 <= min <= max", o.MinDelay, o.MaxDelay)
	}
	note := o.Note
	if note == nil {
		note = func(string) {}
	}
	r := &Result{Mode: "recovery", Seed: pickSeed(o.Seed), Planned: runs, Bug: o.Bug, Ops: ops, Landed: map[string]int{}}
	note(fmt.Sprintf("seed %d (replay with --seed %d)", r.Seed, r.Seed))

	root, err := makeWorkDir(o.Dir)
	if err != nil {
		return nil, err
	}
	keepRoot := o.Keep
	defer func() {
		if keepRoot {
			r.Dir = root
		} else {
			os.RemoveAll(root)
		}
	}()

	// The prepared directory: the workload, every operation in its own
	// group commit, no checkpoint (the CLI cannot say "never", so a
	// threshold far above the workload's size).
	prep := filepath.Join(root, "prepared")
	workload := recoveryOps(ops)
	flags := []string{"--checkpoint-bytes", "1GiB"}
	if ops > 17 {
		flags = append(flags, "--segment-size", strconv.Itoa(padSegment))
	}
	if err := prepare(ctx, o.Binary, prep, workload, flags...); err != nil {
		return nil, err
	}
	segs, err := segments(ctx, o.Binary, prep)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 || segs[len(segs)-1] < 17 {
		return nil, fmt.Errorf("killdriver: the prepared directory's last segment should hold the article's 17 operations; records per segment: %v", segs)
	}
	r.Segments = len(segs)
	prepTree, err := readDirTree(prep)
	if err != nil {
		return nil, err
	}
	hist, err := replay(workload)
	if err != nil {
		return nil, err
	}
	model := hist.Map(hist.Records())

	// The map of a recovery without a crash, and how long one takes
	// here: three recoveries of copies, with the correct store. The
	// window of the delays (see window) learns from these, and from
	// every complete recovery of the runs.
	win := &window{given: o.MaxDelay > 0, lo: o.MinDelay, hi: o.MaxDelay, over: 1.1}
	var want map[string]string
	var times, writes []time.Duration
	for i := range 3 {
		c := filepath.Join(root, fmt.Sprintf("clean-%d", i))
		if err := copyDir(prep, c); err != nil {
			return nil, err
		}
		out, lived, wrote, err := runWatched(command(ctx, o.Binary, "", c, "dump"), c)
		if err != nil {
			return nil, fmt.Errorf("killdriver: a recovery without a crash failed: %w", err)
		}
		win.add(lived, wrote)
		if wrote > 0 {
			writes = append(writes, wrote)
		}
		got, err := opmodel.ParseDump(out)
		if err != nil {
			return nil, err
		}
		if d := opmodel.Diff(model, got); d != "" {
			return nil, fmt.Errorf("killdriver: a recovery without a crash does not give the workload's map (-want +got):\n%s", d)
		}
		want = got
		times = append(times, lived)
		os.RemoveAll(c)
	}
	r.Clean = median(times)

	wrote := ""
	if len(writes) > 0 {
		wrote = fmt.Sprintf(" (it starts changing the directory after %s ms)", millis(median(writes)))
	}
	note(fmt.Sprintf("prepared %s: %d operations in %d segment(s), no snapshot; a recovery without a crash takes %s ms here%s and gives %s",
		prep, ops, len(segs), millis(r.Clean), wrote, opmodel.Summary(want)))

	good := "same map as a recovery without crash"
	r.outcome(good, false)
	keep, err := r.runAll(ctx, runs, o.StopAfterBad, o.Progress, func(i int) (*Failure, error) {
		rng := rand.New(rand.NewPCG(r.Seed, uint64(i)))
		lo, hi := win.bounds()
		if i == 1 || lo < r.MinDelay {
			r.MinDelay = lo
		}
		r.MaxDelay = max(r.MaxDelay, hi)
		delay := win.draw(rng)
		return recoveryRun(ctx, o, root, prep, prepTree, want, i, delay, win, r)
	})
	keepRoot = keepRoot || keep
	if err != nil {
		return r, err
	}
	return r, nil
}

// recoveryRun is one run: copy, recover, kill, recover again, compare.
// It returns the failure when the outcome is bad, and adds the
// recoveries that ran to the end to win.
func recoveryRun(ctx context.Context, o RecoveryOptions, root, prep string, prepTree dirTree,
	want map[string]string, run int, delay time.Duration, win *window, r *Result) (*Failure, error) {
	runDir := filepath.Join(root, fmt.Sprintf("run-%04d", run))
	data := filepath.Join(runDir, "after-kill")
	if err := copyDir(prep, data); err != nil {
		return nil, err
	}
	p, err := startProc(command(ctx, o.Binary, o.Bug, data, "dump"))
	if err != nil {
		return nil, err
	}
	killed, firstLived, firstErr := p.killAfter(delay)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if !killed && firstErr == nil {
		win.add(firstLived, 0)
	}
	// Keep what the kill left; the second recovery runs on a copy.
	tree, err := readDirTree(data)
	if err != nil {
		return nil, err
	}
	if killed {
		if !tree.equal(prepTree) {
			r.Changed++
		}
		r.Landed[tree.names()]++
	}
	again := filepath.Join(runDir, "after-recovery")
	if err := copyDir(data, again); err != nil {
		return nil, err
	}

	desc, bad, detail := "same map as a recovery without crash", false, ""
	var firstMap map[string]string
	if firstErr == nil && !killed {
		firstMap, firstErr = opmodel.ParseDump(p.stdout.String())
	}
	switch {
	case firstErr != nil:
		desc, bad, detail = "first recovery failed: "+scrub(firstErr.Error(), data), true, firstErr.Error()
	case firstMap != nil && !opmodel.Equal(want, firstMap):
		desc, bad = "first recovery (not killed) gave a different map: "+opmodel.Describe(want, firstMap), true
		detail = "diff (-want +got):\n" + opmodel.Diff(want, firstMap)
	default:
		out, lived, wrote, err := runWatched(command(ctx, o.Binary, o.Bug, again, "dump"), again)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var got map[string]string
		if err == nil {
			win.add(lived, wrote)
			got, err = opmodel.ParseDump(out)
		}
		switch {
		case err != nil:
			desc, bad, detail = "second recovery failed: "+scrub(err.Error(), again), true, err.Error()
		case !opmodel.Equal(want, got):
			desc, bad = "different map: "+opmodel.Describe(want, got), true
			detail = "diff (-want +got):\n" + opmodel.Diff(want, got)
		}
	}
	r.count(desc, bad, killed)
	if !bad {
		if !o.Keep {
			os.RemoveAll(runDir)
		}
		return nil, nil
	}
	if err := copyDir(prep, filepath.Join(runDir, "before-kill")); err != nil {
		return nil, err
	}
	return &Failure{
		Run: run, Delay: delay, How: fmt.Sprintf("recovery SIGKILLed after %s ms, %s", millis(delay), killedOrFinished(killed)), Killed: killed, Outcome: desc,
		Dir: runDir, Holds: []string{"before-kill", "after-kill", "after-recovery"}, Detail: detail,
	}, nil
}
