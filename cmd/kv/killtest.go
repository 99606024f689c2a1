package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/killtest/killdriver"
	"github.com/spf13/cobra"
)

// killtestOpts are the flags both modes of killtest share.
type killtestOpts struct {
	runs         int
	ops          int
	seed         uint64
	maxDelay     time.Duration
	expectBad    bool
	keep         bool
	dir          string
	stopAfterBad int
	binary       string
	json         bool
}

func (o *killtestOpts) flags(c *cobra.Command, runs, ops int, opsHelp string) {
	f := c.Flags()
	f.IntVar(&o.runs, "runs", runs, "number of runs")
	f.IntVar(&o.ops, "ops", ops, opsHelp)
	f.Uint64Var(&o.seed, "seed", 0, "replay the random choices of an earlier run (0: pick a seed)")
	f.BoolVar(&o.expectBad, "expect-bad", false, "succeed only if some run has a bad outcome (for --bug variants)")
	f.BoolVar(&o.keep, "keep", false, "keep the work directory even when every run went well")
	f.StringVar(&o.dir, "work-dir", "", "make the work directory here (default: the system's temporary directory)")
	f.IntVar(&o.stopAfterBad, "stop-after-bad", 0, "stop after this many bad outcomes (0: do every run)")
	f.StringVar(&o.binary, "kv", "", "the kv binary to kill (default: this one)")
	f.MarkHidden("kv")
	jsonFlag(c, &o.json, "print the result as one JSON object instead of the report")
}

func (o *killtestOpts) kvBinary() (string, error) {
	if o.binary != "" {
		return o.binary, nil
	}
	return os.Executable()
}

func newKilltestCmd(g *globalOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   "killtest",
		Short: "SIGKILL real kv processes mid-recovery and mid-write, and check what the next recovery finds",
		Long: `killtest runs this kv binary as separate processes, kills them with SIGKILL
at random moments and checks the recovery that follows. A process crash
leaves the page cache intact, so this cannot see a missing fsync (the
crash simulator can); it checks the real binary on the real kernel with
real timing.

Each mode prints the seed first (--seed replays the random choices), a
progress bar on stderr when it is a terminal or a line every tenth of the
runs on stdout otherwise,
then a table of outcomes in the article's form, how many kills landed
while the process was still working, and, for each failing run, its
kept directory, the delay and the diff. The exit status is 0 only when
every run had the expected outcome; with --expect-bad, only when at least
one run had a bad one; interrupted (Ctrl-C), killtest stops the run in
progress, reports the runs done and exits 130. --bug NAME runs every
process as that bug variant.`,
		Example: `  kv killtest recovery
  kv killtest recovery --bug double-apply --expect-bad
  kv killtest writes --runs 100 --chain 2
  kv killtest leases --runs 20`,
		Args: args(0, 0),
	}
	c.AddCommand(newKilltestRecoveryCmd(g), newKilltestWritesCmd(g), newKilltestLeasesCmd(g))
	return c
}

// run checks the common flags, runs one kill mode with a progress printer
// and ^C handling, and reports.
func (o *killtestOpts) run(cmd *cobra.Command, g *globalOpts, what string,
	mode func(ctx context.Context, bin string, pr *killdriver.Printer) (*killdriver.Result, error)) error {
	bin, err := o.kvBinary()
	if err != nil {
		return err
	}
	if _, err := variant.Parse(g.bug); err != nil {
		return usageError{err}
	}
	w := cmd.OutOrStdout()
	notes := w
	if o.json {
		notes = io.Discard
	}
	pr := killdriver.NewSplitPrinter(notes, cmd.ErrOrStderr(), what)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := mode(ctx, bin, pr)
	pr.Done()
	if o.json && res != nil {
		if jerr := json.NewEncoder(w).Encode(res); jerr != nil {
			return jerr
		}
		w = io.Discard
	}
	return killtestReport(w, res, err, o.expectBad)
}

// killtestReport prints the result and turns it into the exit status.
func killtestReport(w io.Writer, res *killdriver.Result, err error, expectBad bool) error {
	if res != nil && res.Runs > 0 {
		res.WriteReport(w)
	}
	if err != nil {
		return err
	}
	if res.OK(expectBad) {
		if expectBad {
			fmt.Fprintf(w, "as expected, %d of %d runs had a bad outcome\n", res.Bad(), res.Runs)
		}
		return nil
	}
	if expectBad {
		return exitError{code: exitFailed, msg: fmt.Sprintf("killtest: --expect-bad, but all %d runs had the expected outcome", res.Runs)}
	}
	if res.Interrupted {
		return exitError{code: exitSignaled + int(syscall.SIGINT), msg: fmt.Sprintf("killtest: interrupted after %d of %d runs; the report above covers them", res.Runs, res.Planned)}
	}
	return exitError{code: exitFailed, msg: fmt.Sprintf("killtest: %d of %d runs had a bad outcome", res.Bad(), res.Runs)}
}
