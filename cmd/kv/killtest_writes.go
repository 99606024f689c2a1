package main

import (
	"context"

	"github.com/kvstore/kv/killtest/killdriver"
	"github.com/spf13/cobra"
)

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
			return o.run(cmd, g, "writer kills", func(ctx context.Context, bin string, pr *killdriver.Printer) (*killdriver.Result, error) {
				return killdriver.Writes(ctx, killdriver.WritesOptions{
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
