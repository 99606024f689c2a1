package killdriver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
)

// WritesOptions configure Writes. Only Binary is required.
type WritesOptions struct {
	// Binary is the path of the kv binary to run.
	Binary string
	// Runs is the number of writers killed; 0 means 100.
	Runs int
	// Ops is the number of operations written to each writer; 0 means
	// 1000.
	Ops int
	// Chain is the number of recoveries killed in a row after each
	// writer, each after a random delay, before the recovery that is
	// checked.
	Chain int
	// MaxDelay bounds the random delay before the writer's SIGKILL (half
	// of the runs; the other half kill it right after a random ack). With
	// 0, the window is sized from this machine for each pace of the
	// feeder: from 0.8 times the time a writer takes to create its first
	// file to a tenth past the time it takes to commit every operation,
	// following the load as complete writers add samples. The
	// recoveries of the chain are killed in a window sized likewise, to
	// a quarter past the end of a recovery.
	MaxDelay time.Duration
	// Bug is the bug variant that every process of a run uses.
	Bug string
	// Seed replays the operations and the random choices; 0 picks one.
	Seed uint64
	// Dir is where the work directory is made; "" means os.TempDir.
	Dir string
	// Keep keeps every run's directories.
	Keep bool
	// StopAfterBad stops after this many bad outcomes; 0 runs them all.
	StopAfterBad int
	// Progress and Note are as in RecoveryOptions.
	Progress func(Progress)
	Note     func(string)
}

// The writer's store: small segments and frequent checkpoints, so that
// the kills land in rotations and checkpoints as well as in appends.
const (
	writerSegment    = "4096"
	writerCheckpoint = "8192"
)

// feederPaces bound how far the feeder runs ahead of the acknowledgements
// (0: not at all). A short lead makes small group commits, and so more
// fsyncs, rotations and checkpoints per operation; a long one makes the
// large groups of a busy writer.
var feederPaces = []int{4, 64, 0}

// writeOps is a seeded stream of n operations on a few keys: adds
// (most of them, so that an operation applied twice or lost shows) on
// counters c0..c7, puts on k0..k15, and deletes of either.
func writeOps(rng *rand.Rand, n int) []string {
	ops := make([]string, n)
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	for i := range ops {
		switch x := rng.IntN(100); {
		case x < 60:
			ops[i] = fmt.Sprintf("add c%d %d", rng.IntN(8), 1+rng.IntN(9))
		case x < 85:
			v := make([]byte, 1+rng.IntN(48))
			for j := range v {
				v[j] = letters[rng.IntN(len(letters))]
			}
			ops[i] = fmt.Sprintf("put k%d %s", rng.IntN(16), v)
		case x < 93:
			ops[i] = fmt.Sprintf("del c%d", rng.IntN(8))
		default:
			ops[i] = fmt.Sprintf("del k%d", rng.IntN(16))
		}
	}
	return ops
}

// writer is one "kv DIR load --ack" fed through a pipe.
type writer struct {
	p *proc
	// acked is the highest "ack N" read; written counts the operations
	// written to the pipe in full.
	mu       sync.Mutex
	cond     *sync.Cond
	acked    int
	written  int
	dead     bool
	protoErr error
	readers  sync.WaitGroup
	ackAt    time.Duration // when the kill at an ack was sent
}

// startWriter starts the writer on dir and feeds it ops, at most pace
// ahead of the acknowledgements (0: no bound). With killAt > 0, it sends
// SIGKILL as soon as it reads "ack killAt".
func startWriter(ctx context.Context, binary, bug, dir string, ops []string, pace, killAt int) (*writer, error) {
	cmd := command(ctx, binary, bug, "--segment-size", writerSegment, "--checkpoint-bytes", writerCheckpoint,
		dir, "load", "--ack")
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	p, err := startProc(cmd)
	// The child has its ends; the parent keeps only the other two, so that
	// the child's death closes the pipes: EOF for the reader, EPIPE for
	// the feeder.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	w := &writer{p: p}
	w.cond = sync.NewCond(&w.mu)
	w.readers.Add(2)
	go func() { // the acknowledgements
		defer w.readers.Done()
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "ack "))
			w.mu.Lock()
			if (err != nil || !strings.HasPrefix(sc.Text(), "ack ") || n != w.acked+1) && w.protoErr == nil {
				w.protoErr = fmt.Errorf("after ack %d the writer printed %q", w.acked, sc.Text())
			}
			if err == nil && n > w.acked {
				w.acked = n
			}
			w.cond.Broadcast()
			w.mu.Unlock()
			if killAt > 0 && n == killAt {
				p.kill()
				w.ackAt = time.Since(p.start)
			}
		}
		w.mu.Lock()
		w.dead = true
		w.cond.Broadcast()
		w.mu.Unlock()
	}()
	go func() { // the operations
		defer w.readers.Done()
		defer inW.Close()
		for i, op := range ops {
			w.mu.Lock()
			for pace > 0 && i-w.acked >= pace && !w.dead {
				w.cond.Wait()
			}
			dead := w.dead
			w.mu.Unlock()
			if dead {
				return
			}
			// One write per line: a line is read by the writer whole or
			// not at all (a pipe write this small is atomic).
			if _, err := inW.WriteString(op + "\n"); err != nil {
				return
			}
			w.mu.Lock()
			w.written = i + 1
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// finish waits for the writer and its pipes; with delay >= 0, it sends
// SIGKILL after delay if the writer is still running. It reports whether
// the signal ended the writer, and how long the writer lived.
func (w *writer) finish(delay time.Duration) (killed bool, lived time.Duration, err error) {
	if delay >= 0 {
		killed, lived, err = w.p.killAfter(delay)
	} else {
		killed, lived, err = w.p.wait()
	}
	w.readers.Wait()
	return killed, lived, err
}

// Writes kills writers. For each run it starts "kv DIR load --ack" on
// a fresh directory with small segments and frequent checkpoints, feeds
// it a seeded stream of put/del/add operations through a pipe, and
// SIGKILLs it after a random delay or right after a random ack. It notes
// the last ack read, kills Chain recoveries in a row (kv DIR dump after a
// random short delay), then recovers and checks that the map is the
// model's after the first m operations for some m between the last ack
// and the number of operations written to the pipe: every acknowledged
// operation is there, none is applied twice, and they are in order.
func Writes(ctx context.Context, o WritesOptions) (*Result, error) {
	if o.Binary == "" {
		return nil, errors.New("killdriver: no kv binary given")
	}
	runs, n := o.Runs, o.Ops
	if runs <= 0 {
		runs = 100
	}
	if n <= 0 {
		n = 1000
	}
	if o.Chain < 0 || o.MaxDelay < 0 {
		return nil, errors.New("killdriver: --chain and --max-delay must not be negative")
	}
	note := o.Note
	if note == nil {
		note = func(string) {}
	}
	r := &Result{Mode: "writes", Seed: pickSeed(o.Seed), Planned: runs, Bug: o.Bug, Ops: n, Chain: o.Chain}
	note(fmt.Sprintf("seed %d (replay with --seed %d)", r.Seed, r.Seed))
	ops := writeOps(rand.New(rand.NewPCG(r.Seed, 0)), n)
	hist, err := replay(ops)
	if err != nil {
		return nil, err
	}

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
	if err := os.WriteFile(filepath.Join(root, "ops.txt"), []byte(strings.Join(ops, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}

	// How long a writer takes to commit everything at each pace, when it
	// starts changing its directory, and the same for a recovery of what
	// it leaves: the first samples of the windows of the random delays
	// (see window), which every complete writer and recovery of the
	// runs adds to. A run without a kill must give the model's final map.
	wins := make([]*window, len(feederPaces))
	chain := &window{over: 1.25}
	var paces []string
	var dumps []time.Duration
	for i, pace := range feederPaces {
		wins[i] = &window{given: o.MaxDelay > 0, hi: o.MaxDelay, over: 1.1}
		dir := filepath.Join(root, fmt.Sprintf("clean-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		watch, werr := watchDir(dir)
		w, err := startWriter(ctx, o.Binary, "", dir, ops, pace, 0)
		if err != nil {
			return nil, err
		}
		_, load, err := w.finish(-1)
		start := time.Duration(0)
		if werr == nil {
			if t := watch.stop(); !t.IsZero() {
				start = t.Sub(w.p.start)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("killdriver: a writer without a kill failed: %w", err)
		}
		if w.protoErr != nil || w.acked != n {
			return nil, fmt.Errorf("killdriver: a writer without a kill acknowledged %d of %d operations (%v)", w.acked, n, w.protoErr)
		}
		wins[i].add(load, start)
		r.Clean = max(r.Clean, load)
		lead := "with the feeder unbounded"
		if pace > 0 {
			lead = fmt.Sprintf("with the feeder at most %d operations ahead", pace)
		}
		paces = append(paces, fmt.Sprintf("%s ms %s (first change after %s ms)", millis(load), lead, millis(start)))

		out, lived, wrote, err := runWatched(command(ctx, o.Binary, "", dir, "dump"), dir)
		if err != nil {
			return nil, fmt.Errorf("killdriver: a recovery without a crash failed: %w", err)
		}
		got, err := opmodel.ParseDump(out)
		if err != nil {
			return nil, err
		}
		if opmodel.Dump(got) != hist.Dump(n) {
			return nil, fmt.Errorf("killdriver: a run without a kill does not give the model's map (-want +got):\n%s",
				opmodel.Diff(hist.Map(n), got))
		}
		chain.add(lived, wrote)
		dumps = append(dumps, lived)
		os.RemoveAll(dir)
	}
	// The header's bounds: those of the windows, widened as they move.
	r.MinDelay, r.MaxDelay = wins[0].bounds()
	for _, w := range wins[1:] {
		lo, hi := w.bounds()
		r.MinDelay, r.MaxDelay = min(r.MinDelay, lo), max(r.MaxDelay, hi)
	}
	note(fmt.Sprintf("%d operations in %s; a writer without a kill takes %s; a recovery of what it leaves, %s ms",
		n, filepath.Join(root, "ops.txt"), strings.Join(paces, ", "), millis(median(dumps))))

	good := "map of a prefix of the operations that holds every acknowledged one"
	r.outcome(good, false)
	keep, err := r.runAll(ctx, runs, o.StopAfterBad, o.Progress, func(i int) (*Failure, error) {
		rng := rand.New(rand.NewPCG(r.Seed, uint64(i)))
		return writesRun(ctx, o, root, ops, hist, i, rng, wins, chain, good, r)
	})
	keepRoot = keepRoot || keep
	if err != nil {
		return r, err
	}
	return r, nil
}

// writesRun is one run: write and kill, kill the chain of recoveries,
// recover, check.
func writesRun(ctx context.Context, o WritesOptions, root string, ops []string, hist *opmodel.History, run int,
	rng *rand.Rand, wins []*window, chain *window, good string, r *Result) (*Failure, error) {
	n := len(ops)
	runDir := filepath.Join(root, fmt.Sprintf("run-%04d", run))
	data := filepath.Join(runDir, "data")
	pi := rng.IntN(len(feederPaces))
	delay, killAt := time.Duration(-1), 0
	var when string
	if rng.IntN(2) == 0 {
		lo, hi := wins[pi].bounds()
		r.MinDelay, r.MaxDelay = min(r.MinDelay, lo), max(r.MaxDelay, hi)
		delay = wins[pi].draw(rng)
		when = "after " + millis(delay) + " ms"
	} else {
		killAt = 1 + rng.IntN(n)
		when = fmt.Sprintf("at ack %d", killAt)
	}
	feeder := "the feeder unbounded"
	if p := feederPaces[pi]; p > 0 {
		feeder = fmt.Sprintf("the feeder at most %d operations ahead", p)
	}
	// The directory exists before the writer starts, as it would for a
	// program that made it: a kill before the writer's first file leaves
	// an empty directory, whose recovery is the empty map.
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	w, err := startWriter(ctx, o.Binary, o.Bug, data, ops, feederPaces[pi], killAt)
	if err != nil {
		return nil, err
	}
	killed, lived, werr := w.finish(delay)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if !killed && werr == nil {
		wins[pi].add(lived, 0)
	}
	if killAt > 0 {
		delay = w.ackAt
	}
	lastAck, written := w.acked, w.written
	how := fmt.Sprintf("writer (%s) SIGKILLed %s, %s", feeder, when, killedOrFinished(killed))
	r.Acked += lastAck
	if killed {
		if t, err := readDirTree(data); err == nil && len(t) > 0 {
			r.Changed++
		}
	}
	stages := []string{"after-kill"}
	if err := copyDir(data, filepath.Join(runDir, "after-kill")); err != nil {
		return nil, err
	}

	desc, bad, detail := good, false, ""
	fail := func(d, det string) { desc, bad, detail = d, true, det }
	switch {
	case werr != nil:
		fail("writer failed: "+scrub(werr.Error(), data), werr.Error())
	case w.protoErr != nil:
		fail("writer printed something else than acks", w.protoErr.Error())
	case !killed && lastAck != n:
		fail("writer finished without acknowledging every operation", fmt.Sprintf("last ack %d of %d", lastAck, n))
	}
	for c := 1; c <= o.Chain && !bad; c++ {
		d := chain.draw(rng)
		p, err := startProc(command(ctx, o.Binary, o.Bug, data, "dump"))
		if err != nil {
			return nil, err
		}
		ck, lived, cerr := p.killAfter(d)
		if !ck && cerr == nil {
			chain.add(lived, 0)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.ChainRuns++
		if ck {
			r.ChainKilled++
		}
		how += fmt.Sprintf("; recovery %d SIGKILLed after %s ms, %s", c, millis(d), killedOrFinished(ck))
		stage := fmt.Sprintf("after-chain-%d", c)
		stages = append(stages, stage)
		if err := copyDir(data, filepath.Join(runDir, stage)); err != nil {
			return nil, err
		}
		if cerr != nil {
			fail(fmt.Sprintf("recovery %d of the chain failed: %s", c, scrub(cerr.Error(), data)), cerr.Error())
		}
	}
	if !bad {
		out, lived, wrote, err := runWatched(command(ctx, o.Binary, o.Bug, data, "dump"), data)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			chain.add(lived, wrote)
		}
		var got map[string]string
		if err == nil {
			got, err = opmodel.ParseDump(out)
		}
		if err != nil {
			fail("recovery failed: "+scrub(err.Error(), data), err.Error())
		} else {
			checkWrites(ops, hist, got, lastAck, written, r, fail)
		}
	}
	r.count(desc, bad, killed)
	if !bad {
		if !o.Keep {
			os.RemoveAll(runDir)
		}
		return nil, nil
	}
	stages = append(stages, "data")
	return &Failure{
		Run: run, Delay: delay, How: how, Killed: killed, Outcome: desc,
		Dir: runDir, Holds: append(stages, "the operations in "+filepath.Join(root, "ops.txt")),
		Detail: fmt.Sprintf("last ack %d, %d operations written to the pipe\n%s", lastAck, written, detail),
	}, nil
}

// checkWrites classifies a recovered map: the model's after m
// operations with lastAck <= m <= written is right; an earlier prefix
// lost acknowledged operations; no prefix at all means operations applied
// twice, out of order or made up.
func checkWrites(ops []string, hist *opmodel.History, got map[string]string, lastAck, written int, r *Result, fail func(string, string)) {
	c := opmodel.Dump(got)
	for m := lastAck; m <= written; m++ {
		if hist.Dump(m) == c {
			r.Unacked += m - lastAck
			return
		}
	}
	for m := lastAck - 1; m >= 0; m-- {
		if hist.Dump(m) == c {
			fail("acknowledged operations lost",
				fmt.Sprintf("the map is the model's after %d operations, but %d were acknowledged; the lost ones: %s",
					m, lastAck, strings.Join(ops[m:min(lastAck, m+5)], "; ")))
			return
		}
	}
	// The closest allowed prefix, by the number of keys that differ.
	best, bestN := lastAck, -1
	for m := lastAck; m <= written; m++ {
		want := hist.Map(m)
		d := 0
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				d++
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				d++
			}
		}
		if bestN < 0 || d < bestN {
			best, bestN = m, d
		}
	}
	want := hist.Map(best)
	fail("map of no prefix of the operations",
		fmt.Sprintf("closest: the model after %d operations: %s\ndiff (-want +got):\n%s", best, opmodel.Describe(want, got), opmodel.Diff(want, got)))
}
