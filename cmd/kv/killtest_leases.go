package main

import (
	"context"
	"time"

	"github.com/kvstore/kv/killtest/killdriver"
	"github.com/spf13/cobra"
)

func newKilltestLeasesCmd(g *globalOpts) *cobra.Command {
	o := &killtestOpts{}
	var ttl, every time.Duration
	c := &cobra.Command{
		Use:   "leases",
		Short: "Kill lease renewers (kv DIR lease keepalive) and check that a restart moves no deadline",
		Long: `leases checks what a restart does to a lease's deadline: nothing. Each run
puts one key on each of --ops new leases of --ttl (kv DIR put KEY VALUE
--ttl), starts "kv DIR lease keepalive IDS --every D" on a random part of
them, which prints each renewed deadline once it is durable, and
SIGKILLs it after a random delay of up to two TTLs. After another random
wait of up to one and a half TTLs it lists the leases (kv DIR lease list
--json), writes a key (kv DIR put probe 1), reads the log and the keys
(kv DIR scan), and checks each lease against the bounds of its deadline:
no earlier
than the last deadline printed for it (an acknowledged renewal is never
lost), no later than the renewer's death plus the TTL for a lease it
renewed, or the printed deadline for one it did not (no grace on a
restart). A key must be there until its lower bound, gone once its upper
bound passed, and a lease whose upper bound passed before the put must
have its expiry in the log, before the put.

Runs take a few TTLs each; the clock is the real one.`,
		Example: `  kv killtest leases
  kv killtest leases --runs 50 --ttl 1s
  kv killtest leases --bug lease-grace --expect-bad`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, g, "renewer kills", func(ctx context.Context, bin string, pr *killdriver.Printer) (*killdriver.Result, error) {
				return killdriver.Leases(ctx, killdriver.LeasesOptions{
					Binary: bin, Runs: o.runs, Leases: o.ops, TTL: ttl, Every: every, Bug: g.bug,
					Seed: o.seed, Dir: o.dir, Keep: o.keep, StopAfterBad: o.stopAfterBad,
					Progress: pr.Progress, Note: pr.Note,
				})
			})
		},
	}
	o.flags(c, 20, 3, "leases of each run, each with one key")
	c.Flags().DurationVar(&ttl, "ttl", 3*time.Second, "every lease's TTL")
	c.Flags().DurationVar(&every, "every", 0, "the renewer's period (default: a thirtieth of the TTL)")
	return c
}
