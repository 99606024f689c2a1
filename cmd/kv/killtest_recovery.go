package main

import (
	"context"
	"time"

	"github.com/kvstore/kv/killtest/killdriver"
	"github.com/spf13/cobra"
)

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
			return o.run(cmd, g, "recovery kills", func(ctx context.Context, bin string, pr *killdriver.Printer) (*killdriver.Result, error) {
				return killdriver.Recovery(ctx, killdriver.RecoveryOptions{
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
