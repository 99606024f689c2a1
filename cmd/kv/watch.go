package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

func newWatchCmd(g *globalOpts) *cobra.Command {
	o := &kvcli.WatchOptions{
		Compacted: func(ce *kv.CompactedError) string {
			return fmt.Sprintf("revision %d is no longer in the log; the oldest this directory can serve is %d (kv DIR dump prints the map; watch --from its revision + 1 after it)", ce.Requested, ce.Oldest)
		},
		Describe: describe,
	}
	c := &cobra.Command{
		Use:   "watch DIR [PREFIX]",
		Short: "Print the changes to keys under a prefix as they become durable",
		Long: `watch prints every change a writer commits to the keys under PREFIX (all
keys when PREFIX is left out), one line each, in revision order, once
the change is durable: a put as "REV put KEY=VALUE" (the line kv DIR dump
prints, after the revision), a delete as "REV del KEY", the result of an
add as a put of its new value. A transaction's changes share a revision.

It runs beside the writer, in another process, without its lock, and
writes nothing: it reads the snapshot, then follows the log as it grows,
woken by the directory's changes (inotify), and goes on across the
writer's checkpoints and restarts, and while no writer runs. It ends on
Ctrl-C or SIGTERM (exit 0), after --count changes, or with an error.

--from REV starts at revision REV, so that a watcher that printed up to
REV-1 misses nothing when it comes back. A revision older than the
snapshot's is gone (exit 1, naming the oldest revision there is): read
the map with dump, then watch from its revision + 1. The default is the
next revision to commit.`,
		Example: `  kv data watch locks/                  # changes under locks/ from now on
  kv data watch --from 120 --json        # every change from revision 120, as JSON
  kv data watch cfg/ --prev --count 1    # wait for the next change, with the value before it`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			var prefix []byte
			if len(a) == 2 {
				var err error
				if prefix, err = parseArg("prefix", a[1]); err != nil {
					return err
				}
			}
			if err := o.Check(); err != nil {
				return err
			}
			if err := requireDir(a[0]); err != nil {
				return err
			}
			opts, err := g.storeOptions(true)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var wopts []kv.WatchOption
			if o.Prev {
				wopts = append(wopts, kv.WithPrev())
			}
			return kvcli.PrintWatch(ctx, cmd.OutOrStdout(), kv.WatchDir(ctx, a[0], opts, prefix, kv.Revision(o.From), wopts...), o)
		},
	}
	kvcli.WatchFlags(c.Flags(), o)
	return c
}
