package killdriver

// What the runs of the kill driver found, and its report in the
// article's table form.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Outcome is one row of the report: what the run after the kill
// found, and how many runs found it with the first process killed or
// finished.
type Outcome struct {
	// Desc words the outcome: "same map as a recovery without crash",
	// "different map: c=110 instead of 55, d=14 instead of 7", ...
	Desc string
	// Bad is set for every outcome but the expected one.
	Bad bool
	// Killed and Finished count the runs whose first process was killed
	// by SIGKILL and that ended by itself before the signal.
	Killed, Finished int
}

// Failure is a run with a bad outcome, kept for a look.
type Failure struct {
	// Run numbers the run from 1.
	Run int
	// Delay is when SIGKILL was sent after the start of the process (for
	// a writes run killed at an acknowledgement, the time it took).
	Delay time.Duration
	// How says what was killed when, and whether the signal found it
	// still running: "recovery SIGKILLed after 3.1 ms, killed".
	How string
	// Killed is set when the signal ended the process.
	Killed bool
	// Outcome is the row the run counts in.
	Outcome string
	// Dir is the run's directory, and Holds what it holds: the data
	// directories the run started from, that the kill left, and that
	// the recovery after it made, and the operations of a writes run.
	Dir   string
	Holds []string
	// Detail is the evidence: a go-cmp diff of the maps (-want +got),
	// or the error.
	Detail string
}

// Result is what a kill-driver run found.
type Result struct {
	// Mode is "recovery" or "writes".
	Mode string
	// Seed replays the run's random choices (--seed).
	Seed uint64
	// Planned is the number of runs asked for; Runs the number done (fewer
	// when stopped early).
	Planned, Runs int
	// MinDelay and MaxDelay bound the random delay before SIGKILL.
	MinDelay, MaxDelay time.Duration
	// Bug is the bug variant the processes ran with, "" for none.
	Bug string
	// Ops is the number of operations of the workload; Segments the log
	// segments of the prepared directory (recovery mode).
	Ops, Segments int
	// Chain is the number of recoveries killed after each writer
	// (writes mode).
	Chain int
	// Clean is how long a run without a kill takes here: a recovery
	// (recovery mode) or a load of every operation (writes mode).
	Clean time.Duration
	// Killed and Finished count the runs whose first process the signal
	// ended and that had exited before it.
	Killed, Finished int
	// Changed counts the killed runs whose directory the killed process
	// had already changed: the kill landed in the middle of the work, not
	// during the start-up of the process.
	Changed int
	// Landed counts the killed runs by the files the kill left, as in
	// "log.000001 log.000002 snapshot" (recovery mode).
	Landed map[string]int
	// ChainKilled and ChainRuns count the recoveries of the chain that
	// were killed, and all of them (writes mode).
	ChainKilled, ChainRuns int
	// Acked sums the acknowledged operations over the runs, and
	// Unacked the operations applied past the last acknowledgement
	// (writes mode).
	Acked, Unacked int
	// Outcomes are the report's rows, the expected outcome first, then in
	// order of first appearance.
	Outcomes []*Outcome
	// Failures lists the runs with a bad outcome.
	Failures []Failure
	// Dir is the work directory when it was kept (failures or Keep), ""
	// when it was removed.
	Dir string
	// Interrupted is set when the context ended the runs early.
	Interrupted bool
	// Stopped is set when the runs stopped at StopAfterBad.
	Stopped bool
}

// Bad counts the runs with a bad outcome.
func (r *Result) Bad() int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Bad {
			n += o.Killed + o.Finished
		}
	}
	return n
}

// OK reports whether the runs had the expected outcome: none bad, or,
// with expectBad (for a bug variant), at least one bad.
func (r *Result) OK(expectBad bool) bool {
	if expectBad {
		return r.Bad() > 0
	}
	return r.Bad() == 0 && !r.Interrupted && r.Runs > 0
}

// KilledShare is the share of runs whose first process the signal ended.
func (r *Result) KilledShare() float64 {
	if r.Runs == 0 {
		return 0
	}
	return float64(r.Killed) / float64(r.Runs)
}

// outcome returns the row desc, adding it if new.
func (r *Result) outcome(desc string, bad bool) *Outcome {
	for _, o := range r.Outcomes {
		if o.Desc == desc {
			return o
		}
	}
	o := &Outcome{Desc: desc, Bad: bad}
	r.Outcomes = append(r.Outcomes, o)
	return o
}

// failed counts f's run as a bad one, under its outcome, and returns f:
// for a run that fails before its checks (its renewer printed something
// else, or failed), which would otherwise be in no row of the table and
// in neither Runs nor Bad.
func (r *Result) failed(f *Failure) *Failure {
	r.count(f.Outcome, true, f.Killed)
	return f
}

func (r *Result) count(desc string, bad, killed bool) {
	o := r.outcome(desc, bad)
	if killed {
		o.Killed++
		r.Killed++
	} else {
		o.Finished++
		r.Finished++
	}
	r.Runs++
}

// WriteTable prints the article's table:
//
//	500 runs, SIGKILL after a random delay between 0 and 5 ms
//	killed finished outcome
//	   404       96 same map as a recovery without crash
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintln(w, r.header())
	fmt.Fprintln(w, "killed finished outcome")
	for _, o := range r.Outcomes {
		if o.Killed+o.Finished == 0 {
			continue
		}
		fmt.Fprintf(w, "%6d %8d %s\n", o.Killed, o.Finished, o.Desc)
	}
}

func (r *Result) header() string {
	delay := fmt.Sprintf("a random delay between %s and %s ms", millis(r.MinDelay), millis(r.MaxDelay))
	if r.Mode == "writes" {
		s := fmt.Sprintf("%d runs of %d operations, SIGKILL of the writer after %s or at a random ack", r.Runs, r.Ops, delay)
		if r.Chain > 0 {
			s += fmt.Sprintf(", then of %d recover%s", r.Chain, map[bool]string{true: "y", false: "ies"}[r.Chain == 1])
		}
		return s
	}
	return fmt.Sprintf("%d runs, SIGKILL after %s", r.Runs, delay)
}

// killedOrFinished words whether SIGKILL ended a process.
func killedOrFinished(killed bool) string {
	if killed {
		return "killed"
	}
	return "had finished"
}

// WriteReport prints the table, where the kills landed, the failures
// with their directories and diffs, and a plain warning when too few
// runs were killed to prove much.
func (r *Result) WriteReport(w io.Writer) {
	r.WriteTable(w)
	if r.Runs == 0 {
		return
	}
	what := "recovery"
	switch r.Mode {
	case "writes":
		what = "writer"
	case "leases":
		what = "renewer"
	}
	fmt.Fprintf(w, "%d of %d kills landed while the %s was still working (%.0f%%)", r.Killed, r.Runs, what, 100*r.KilledShare())
	if r.Killed > 0 {
		fmt.Fprintf(w, "; %d of them after it had changed the directory", r.Changed)
	}
	fmt.Fprintln(w)
	if len(r.Landed) > 0 {
		fmt.Fprintln(w, "files the killed recoveries left:")
		keys := make([]string, 0, len(r.Landed))
		for k := range r.Landed {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.SortStableFunc(keys, func(a, b string) int { return r.Landed[b] - r.Landed[a] })
		for _, k := range keys {
			fmt.Fprintf(w, "%6d %s\n", r.Landed[k], k)
		}
	}
	if r.Mode == "writes" && r.Runs > 0 {
		fmt.Fprintf(w, "acknowledged operations per run: %.0f on average; applied past the last ack: %.1f on average\n",
			float64(r.Acked)/float64(r.Runs), float64(r.Unacked)/float64(r.Runs))
		if r.ChainRuns > 0 {
			fmt.Fprintf(w, "recoveries in the chains: %d, of which %d killed\n", r.ChainRuns, r.ChainKilled)
		}
	}
	switch {
	case 3*r.Killed < r.Runs:
		fmt.Fprintf(w, "WARNING: only %d of %d runs were killed before the %s finished, so most runs tested nothing: lower --max-delay, or leave it out to size the delays from this machine\n",
			r.Killed, r.Runs, what)
	case 4*r.Changed < r.Runs:
		fmt.Fprintf(w, "WARNING: only %d of %d kills landed after the %s had changed the directory; the others hit the start-up of the process, which tests little: leave --max-delay out to size the delays from this machine\n",
			r.Changed, r.Runs, what)
	}
	const most = 5
	for i, f := range r.Failures {
		if i == most {
			fmt.Fprintf(w, "... and %d more failing runs under %s\n", len(r.Failures)-most, r.Dir)
			break
		}
		fmt.Fprintf(w, "run %d: %s: %s\n", f.Run, f.How, f.Outcome)
		if f.Dir != "" {
			fmt.Fprintf(w, "  kept in %s (%s)\n", f.Dir, strings.Join(f.Holds, ", "))
		}
		if f.Detail != "" {
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(strings.TrimRight(f.Detail, "\n"), "\n", "\n  "))
		}
	}
	switch {
	case r.Interrupted:
		fmt.Fprintf(w, "interrupted after %d of %d runs\n", r.Runs, r.Planned)
	case r.Stopped:
		fmt.Fprintf(w, "stopped after %d of %d runs, at bad outcome %d\n", r.Runs, r.Planned, r.Bad())
	}
	if r.Dir != "" {
		fmt.Fprintf(w, "work directory kept: %s\n", r.Dir)
	}
}

// runAll runs run for i = 1..runs, recording failures, reporting
// progress, and stopping on an interrupt or after stopAfterBad bad
// outcomes. It returns whether a failure means the work directory must be
// kept.
func (r *Result) runAll(ctx context.Context, runs, stopAfterBad int, progress func(Progress),
	run func(i int) (*Failure, error)) (keep bool, err error) {
	for i := 1; i <= runs; i++ {
		if ctx.Err() != nil {
			r.Interrupted = true
			break
		}
		f, err := run(i)
		if err != nil {
			if ctx.Err() != nil {
				r.Interrupted = true
				break
			}
			return keep, err
		}
		if f != nil {
			keep = true
			r.Failures = append(r.Failures, *f)
		}
		if progress != nil {
			progress(Progress{Done: r.Runs, Total: runs, Killed: r.Killed, Bad: r.Bad()})
		}
		if stopAfterBad > 0 && r.Bad() >= stopAfterBad {
			r.Stopped = r.Runs < runs
			break
		}
	}
	return keep, nil
}
