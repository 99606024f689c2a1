package killdriver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LeasesOptions configure Leases. Only Binary is required.
type LeasesOptions struct {
	// Binary is the path of the kv binary to run.
	Binary string
	// Runs is the number of renewers killed; 0 means 20.
	Runs int
	// Leases is the number of leases of each run, each with one key; 0
	// means 3.
	Leases int
	// TTL is every lease's TTL; 0 means 3 s. The runs take a few TTLs
	// each: the kill comes within two, the check within one and a half
	// after it.
	TTL time.Duration
	// Every is the renewer's period; 0 means a thirtieth of TTL.
	Every time.Duration
	// Bug is the bug variant that every process of a run uses.
	Bug string
	// Seed replays the random choices; 0 picks one.
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

// Leases kills lease renewers and checks what a restart does to a
// deadline: nothing (FORMAT.md, "Leases"). Each run puts one key on each
// of a few new leases (kv DIR put KEY VALUE --ttl TTL, which prints the
// lease's deadline), starts "kv DIR lease keepalive IDS --every D" on a
// random part of them, which prints each renewed deadline once it is
// durable, and SIGKILLs it after a random delay of up to two TTLs. After
// another up to one and a half, it lists the leases (kv DIR lease list
// --json, a reader), writes a key (kv DIR put probe 1, a writer's open),
// reads the log (kv DIR log --json) and the keys (kv DIR scan, a reader),
// and checks each lease against the two
// bounds its deadline has: at least the last deadline printed for it
// (an acknowledged renewal is never lost), and at most the renewer's
// death plus the TTL for a lease it renewed, the printed deadline for one
// it did not (a restart grants no grace). A lease listed must have a
// deadline between the bounds; a key must be there while the lower
// bound has not passed and gone once the upper one has; and a lease whose
// upper bound passed before the put must have its expiry in the log,
// before the put.
func Leases(ctx context.Context, o LeasesOptions) (*Result, error) {
	if o.Binary == "" {
		return nil, errors.New("killdriver: no kv binary given")
	}
	runs := o.Runs
	if runs <= 0 {
		runs = 20
	}
	if o.Leases <= 0 {
		o.Leases = 3
	}
	if o.TTL <= 0 {
		o.TTL = 3 * time.Second
	}
	if o.Every <= 0 {
		o.Every = max(o.TTL/30, time.Millisecond)
	}
	note := o.Note
	if note == nil {
		note = func(string) {}
	}
	r := &Result{Mode: "leases", Seed: pickSeed(o.Seed), Planned: runs, Bug: o.Bug, Ops: o.Leases,
		MinDelay: 0, MaxDelay: 2 * o.TTL}
	note(fmt.Sprintf("seed %d (replay with --seed %d)", r.Seed, r.Seed))
	note(fmt.Sprintf("%d leases of %v per run, renewed every %v by kv DIR lease keepalive", o.Leases, o.TTL, o.Every))
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
	good := "every lease within the bounds of its acknowledged deadlines"
	r.outcome(good, false)
	keep, err := r.runAll(ctx, runs, o.StopAfterBad, o.Progress, func(i int) (*Failure, error) {
		rng := rand.New(rand.NewPCG(r.Seed, uint64(i)))
		return leasesRun(ctx, o, root, i, rng, good, r)
	})
	keepRoot = keepRoot || keep
	return r, err
}

// runLease is one lease of a run: its key, and the bounds of its
// deadline.
type runLease struct {
	id      uint64
	key     string
	renewed bool      // the renewer renews it
	acked   time.Time // the last deadline printed for it, to the millisecond
}

// leasesRun is one run: put the keys on leases, renew some, kill the
// renewer, wait, check.
func leasesRun(ctx context.Context, o LeasesOptions, root string, run int, rng *rand.Rand, good string, r *Result) (*Failure, error) {
	runDir := filepath.Join(root, fmt.Sprintf("run-%04d", run))
	data := filepath.Join(runDir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	leases := make([]*runLease, o.Leases)
	var renewed []string
	for i := range leases {
		out, _, err := runToEnd(command(ctx, o.Binary, o.Bug, data, "put", "--create", fmt.Sprintf("k%d", i), strconv.Itoa(i), "--ttl", o.TTL.String()))
		if err != nil {
			return nil, fmt.Errorf("killdriver: put --ttl: %w", err)
		}
		_, line, _ := strings.Cut(out, "\n") // after "revision N"
		id, deadline, err := parseLeaseLine(line)
		if err != nil {
			return nil, fmt.Errorf("killdriver: put --ttl printed %q: %w", out, err)
		}
		leases[i] = &runLease{id: id, key: fmt.Sprintf("k%d", i), acked: deadline, renewed: rng.IntN(3) > 0}
		if leases[i].renewed {
			renewed = append(renewed, strconv.FormatUint(id, 10))
		}
	}
	byID := map[uint64]*runLease{}
	for _, l := range leases {
		byID[l.id] = l
	}
	delay := time.Duration(rng.Int64N(int64(2*o.TTL) + 1))
	how := "no lease renewed, nothing killed"
	killed, renewals := false, 0
	var died time.Time
	if len(renewed) > 0 {
		args := append([]string{data, "lease", "keepalive"}, renewed...)
		p, lines, err := startLines(command(ctx, o.Binary, o.Bug, append(args, "--every", o.Every.String())...))
		if err != nil {
			return nil, err
		}
		var kerr error
		killed, _, kerr = p.killAfter(delay)
		died = time.Now()
		for _, line := range lines.wait() {
			id, deadline, err := parseLeaseLine(line)
			if err != nil || byID[id] == nil || !byID[id].renewed {
				return r.failed(&Failure{Run: run, Delay: delay, How: "renewer", Killed: killed, Outcome: "renewer printed something else", Dir: runDir,
					Detail: fmt.Sprintf("%q (%v)", line, err)}), nil
			}
			if deadline.Before(byID[id].acked) {
				return r.failed(&Failure{Run: run, Delay: delay, How: "renewer", Killed: killed, Outcome: "a renewal moved a deadline earlier", Dir: runDir,
					Detail: fmt.Sprintf("lease %d: %s after %s", id, deadline, byID[id].acked)}), nil
			}
			byID[id].acked = deadline
			renewals++
		}
		how = fmt.Sprintf("renewer of %d lease(s) SIGKILLed after %s ms, %s, after %d renewal(s)", len(renewed), millis(delay), killedOrFinished(killed), renewals)
		if kerr != nil && !killed {
			return r.failed(&Failure{Run: run, Delay: delay, How: how, Outcome: "renewer failed: " + scrub(kerr.Error(), data), Dir: runDir,
				Detail: kerr.Error()}), nil
		}
		if killed && renewals > len(renewed) {
			r.Changed++ // it had renewed since its start when it died
		}
	}
	wait := time.Duration(rng.Int64N(int64(3*o.TTL/2) + 1))
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	how += fmt.Sprintf("; checked %s ms later", millis(wait))
	if err := copyDir(data, filepath.Join(runDir, "after-kill")); err != nil {
		return nil, err
	}

	desc, bad, detail := good, false, []string{}
	fail := func(d, det string) {
		if !bad {
			desc = d
		}
		bad = true
		detail = append(detail, det)
	}
	// upper is the latest deadline lease l can have: the renewer's last
	// renewal was evaluated before it died.
	upper := func(l *runLease) time.Time {
		if l.renewed {
			return died.Add(o.TTL)
		}
		return l.acked.Add(time.Millisecond) // printed to the millisecond
	}

	// A reader's list.
	out, _, err := runToEnd(command(ctx, o.Binary, o.Bug, data, "lease", "list", "--json"))
	listEnd := time.Now()
	if err != nil {
		fail("lease list failed: "+scrub(err.Error(), data), err.Error())
	}
	listed := map[uint64]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" || err != nil {
			continue
		}
		var jl struct {
			ID   uint64 `json:"id"`
			Unix int64  `json:"deadline_unix_ns"`
		}
		if jerr := json.Unmarshal([]byte(line), &jl); jerr != nil {
			fail("lease list printed something else", line)
			continue
		}
		listed[jl.ID] = time.Unix(0, jl.Unix)
	}
	for _, l := range leases {
		d, ok := listed[l.id]
		switch {
		case ok && d.Before(l.acked):
			fail("deadline earlier than acknowledged", fmt.Sprintf("lease %d: deadline %s, acknowledged %s", l.id, stamp(d), stamp(l.acked)))
		case ok && d.After(upper(l)):
			fail("deadline moved past what was ever given (grace)", fmt.Sprintf("lease %d: deadline %s, at most %s", l.id, stamp(d), stamp(upper(l))))
		case !ok && err == nil && l.acked.After(listEnd):
			fail("lease gone before its acknowledged deadline", fmt.Sprintf("lease %d: not listed at %s, acknowledged until %s", l.id, stamp(listEnd), stamp(l.acked)))
		}
	}

	// A writer's write: it commits the expiries due before it.
	putStart := time.Now()
	_, _, err = runToEnd(command(ctx, o.Binary, o.Bug, data, "put", "probe", "1"))
	if err != nil {
		fail("recovery failed: "+scrub(err.Error(), data), err.Error())
	} else {
		ended, probe, err := loggedEnds(ctx, o, data)
		if err != nil {
			fail("log failed: "+scrub(err.Error(), data), err.Error())
		}
		for _, l := range leases {
			if rev, ok := ended[l.id]; !upper(l).After(putStart) && (!ok || rev > probe) {
				fail("expiry not in the log before the first write past the deadline",
					fmt.Sprintf("lease %d: deadline at most %s, put at %s (revision %d), expiry at revision %d", l.id, stamp(upper(l)), stamp(putStart), probe, rev))
			}
		}
	}

	// A reader's keys.
	scanStart := time.Now()
	out, _, err = runToEnd(command(ctx, o.Binary, o.Bug, data, "scan"))
	scanEnd := time.Now()
	if err != nil {
		fail("scan failed: "+scrub(err.Error(), data), err.Error())
	} else {
		keys := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			if k, _, ok := strings.Cut(line, "="); ok {
				keys[k] = true
			}
		}
		for _, l := range leases {
			switch {
			case keys[l.key] && !upper(l).After(scanStart):
				fail("key outlived its lease's deadline", fmt.Sprintf("key %s of lease %d there at %s, deadline at most %s", l.key, l.id, stamp(scanStart), stamp(upper(l))))
			case !keys[l.key] && l.acked.After(scanEnd):
				fail("key gone before its lease's acknowledged deadline", fmt.Sprintf("key %s of lease %d gone at %s, acknowledged until %s", l.key, l.id, stamp(scanEnd), stamp(l.acked)))
			}
		}
	}
	r.count(desc, bad, killed)
	if !bad {
		if !o.Keep {
			os.RemoveAll(runDir)
		}
		return nil, nil
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, fmt.Sprintf("lease %d (key %s, renewed %v, acknowledged until %s)", l.id, l.key, l.renewed, stamp(l.acked)))
	}
	return &Failure{Run: run, Delay: delay, How: how, Killed: killed, Outcome: desc, Dir: runDir,
		Holds:  []string{"after-kill", "data"},
		Detail: fmt.Sprintf("%s; renewer dead at %s\n%s", strings.Join(ids, ", "), stamp(died), strings.Join(detail, "\n"))}, nil
}

// stamp is a time as the report prints it.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// parseLeaseLine reads "lease ID, deadline RFC3339", as put --ttl and
// lease keepalive print it.
func parseLeaseLine(line string) (uint64, time.Time, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "lease ")
	idS, dl, ok2 := strings.Cut(rest, ", deadline ")
	if !ok || !ok2 {
		return 0, time.Time{}, fmt.Errorf("not a lease line")
	}
	id, err := strconv.ParseUint(idS, 10, 64)
	if err != nil {
		return 0, time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, dl)
	return id, t, err
}

// loggedEnds reads the log and returns the revision of the expiry or
// revoke of each lease it holds one of, and the revision of the last put
// of the key probe.
func loggedEnds(ctx context.Context, o LeasesOptions, data string) (map[uint64]uint64, uint64, error) {
	out, _, err := runToEnd(command(ctx, o.Binary, o.Bug, data, "log", "--json"))
	if err != nil {
		return nil, 0, err
	}
	ended, probe := map[uint64]uint64{}, uint64(0)
	for _, line := range strings.Split(out, "\n") {
		var rec struct {
			Revision uint64 `json:"revision"`
			Ops      []struct {
				Op  string `json:"op"`
				Key string `json:"key"`
			} `json:"ops"`
			Lease *struct {
				Action string `json:"action"`
				ID     uint64 `json:"id"`
			} `json:"lease"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec.Lease != nil && (rec.Lease.Action == "expire" || rec.Lease.Action == "revoke") {
			ended[rec.Lease.ID] = rec.Revision
		}
		if len(rec.Ops) == 1 && rec.Ops[0].Op == "put" && rec.Ops[0].Key == "probe" {
			probe = rec.Revision
		}
	}
	return ended, probe, nil
}

// lineReader collects a process's stdout lines as they come.
type lineReader struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func (lr *lineReader) wait() []string {
	<-lr.done
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.lines
}

// startLines starts cmd with its stdout read line by line as it comes.
func startLines(cmd *exec.Cmd) (*proc, *lineReader, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout = outW
	p, err := startProc(cmd)
	outW.Close() // the child has its end: its death closes the pipe
	if err != nil {
		outR.Close()
		return nil, nil, err
	}
	lr := &lineReader{done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lr.mu.Lock()
			lr.lines = append(lr.lines, sc.Text())
			lr.mu.Unlock()
		}
	}()
	return p, lr, nil
}
