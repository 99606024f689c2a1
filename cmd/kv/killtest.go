package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/killtest"
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
progress bar on a terminal or a line every tenth of the runs otherwise,
then a table of outcomes in the article's form, how many kills landed
while the process was still working, and, for each failing run, its
kept directory, the delay and the diff. The exit status is 0 only when
every run had the expected outcome; with --expect-bad, only when at least
one run had a bad one. The global --segment-size, --checkpoint-bytes and
--sync flags do not apply; --bug NAME runs every process as that bug
variant.`,
		Example: `  kv killtest recovery
  kv killtest recovery --bug double-apply --expect-bad
  kv killtest writes --runs 100 --chain 2`,
		Args: args(0, 0),
	}
	c.AddCommand(newKilltestRecoveryCmd(g), newKilltestWritesCmd(g))
	return c
}

func newKilltestRecoveryCmd(g *globalOpts) *cobra.Command {
	o := &killtestOpts{}
	var minDelay time.Duration
	c := &cobra.Command{
		Use:   "recovery",
		Short: "Kill recoveries (kv DIR dump) and check that a second recovery gives the map of one without a crash",
		Long: `recovery prepares a data directory holding a workload in log segments
and no snapshot: by default the article's 17 operations (add c 1 ... add
c 10, put k1 v1 ... put k5 v5, del k3, add d 7; the right map has c=55 and
d=7), or with --ops N more of them in more segments. Then, for each run,
it copies the directory, starts "kv COPY dump", sends SIGKILL after a
random delay between --min-delay and --max-delay, runs "kv COPY dump"
again and compares the map with the one of a recovery without a crash.

Without --max-delay the window is sized from this machine and follows
its load: it opens at 0.8 times the time at which recent complete
recoveries started to change the directory (before that, a kill lands in
the start-up of the process, which here can take longer than the recovery
itself) and closes a tenth past their time to the end, so that most runs
are killed while the recovery works. The article used 0 to 5 ms, on a
machine where the whole recovery took a few milliseconds.`,
		Example: `  kv killtest recovery                                  # 500 runs
  kv killtest recovery --max-delay 5ms                  # the article's delays
  kv killtest recovery --bug double-apply --expect-bad  # the bug must show: c=110 instead of 55
  kv killtest recovery --ops 401 --runs 100             # 200 more segments to delete
  kv killtest recovery --seed 1234 --keep               # replay, keep every directory`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, g, "recovery kills", func(ctx context.Context, bin string, pr *killtest.KillPrinter) (*killtest.KillResult, error) {
				return killtest.KillRecovery(ctx, killtest.KillRecoveryOptions{
					Binary: bin, Runs: o.runs, Ops: o.ops, MinDelay: minDelay, MaxDelay: o.maxDelay, Bug: g.bug,
					Seed: o.seed, Dir: o.dir, Keep: o.keep, StopAfterBad: o.stopAfterBad,
					Progress: pr.Progress, Note: pr.Note,
				})
			})
		},
	}
	o.flags(c, 500, 17, "operations in the workload (17: the article's; more fill more segments before them)")
	c.Flags().DurationVar(&o.maxDelay, "max-delay", 0, "longest delay before SIGKILL (default: sized from a recovery here)")
	c.Flags().DurationVar(&minDelay, "min-delay", 0, "shortest delay before SIGKILL")
	return c
}

func newKilltestWritesCmd(g *globalOpts) *cobra.Command {
	o := &killtestOpts{}
	var chain int
	c := &cobra.Command{
		Use:   "writes",
		Short: "Kill writers (kv DIR load --ack) and check that recovery keeps every acknowledged operation, once",
		Long: `writes generates a seeded stream of operations on a few keys, mostly adds
(so that an operation lost or applied twice shows), and for each run
starts "kv --segment-size 4096 --checkpoint-bytes 8192 DIR load --ack" on
a fresh directory, feeds it the operations through a pipe and SIGKILLs
it, after a random delay (up to --max-delay) in half of the runs and
right after a random "ack N" line in the other half. It notes the last
ack it read, kills --chain recoveries in a row (kv DIR dump, each after a
random short delay), then recovers and checks that the map is the one
after the first m operations for some m between the last ack and the
number of operations written to the pipe: every acknowledged operation
is there, none is applied twice, and they are in order.

Without --max-delay the window of the writer's kill is sized from this
machine, for each pace of the feeder (at most 4 or 64 operations ahead of
the acks, or unbounded): from 0.8 times the time a writer takes to create
its first file to a tenth past the time it takes to commit every
operation. The recoveries of the chain are killed likewise.`,
		Example: `  kv killtest writes
  kv killtest writes --runs 200 --ops 2000 --chain 2
  kv killtest writes --bug double-apply --chain 3 --expect-bad`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, g, "writer kills", func(ctx context.Context, bin string, pr *killtest.KillPrinter) (*killtest.KillResult, error) {
				return killtest.KillWrites(ctx, killtest.KillWritesOptions{
					Binary: bin, Runs: o.runs, Ops: o.ops, Chain: chain, MaxDelay: o.maxDelay, Bug: g.bug,
					Seed: o.seed, Dir: o.dir, Keep: o.keep, StopAfterBad: o.stopAfterBad,
					Progress: pr.Progress, Note: pr.Note,
				})
			})
		},
	}
	o.flags(c, 100, 1000, "operations written to each writer")
	c.Flags().DurationVar(&o.maxDelay, "max-delay", 0, "longest delay before the writer's SIGKILL (default: sized from a writer here)")
	c.Flags().IntVar(&chain, "chain", 0, "recoveries to kill in a row after each writer, before the one that is checked")
	return c
}

// run checks the common flags, runs one kill mode with a progress printer
// and ^C handling, and reports.
func (o *killtestOpts) run(cmd *cobra.Command, g *globalOpts, what string,
	mode func(ctx context.Context, bin string, pr *killtest.KillPrinter) (*killtest.KillResult, error)) error {
	bin, err := o.kvBinary()
	if err != nil {
		return err
	}
	if _, err := variant.Parse(g.bug); err != nil {
		return usageError{err}
	}
	w := cmd.OutOrStdout()
	pr := killtest.NewKillPrinter(w, what)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	res, err := mode(ctx, bin, pr)
	pr.Done()
	return killtestReport(w, res, err, o.expectBad)
}

// killtestReport prints the result and turns it into the exit status.
func killtestReport(w io.Writer, res *killtest.KillResult, err error, expectBad bool) error {
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
		return exitError{code: 1, msg: fmt.Sprintf("killtest: --expect-bad, but all %d runs had the expected outcome", res.Runs)}
	}
	if res.Interrupted {
		return exitError{code: 1, msg: "killtest: interrupted"}
	}
	return exitError{code: 1, msg: fmt.Sprintf("killtest: %d of %d runs had a bad outcome", res.Bad(), res.Runs)}
}
