package main

import (
	"context"
	"errors"
	"github.com/kvstore/kv/kv"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/internal/kvcli"
	"github.com/spf13/cobra"
)

type locksOpts struct {
	json       bool
	staleAfter time.Duration
	slots      int
	strategy   string
}

func newLocksCmd(g *globalOpts) *cobra.Command {
	o := &locksOpts{}
	c := &cobra.Command{
		Use:   "locks DIR [sweep]",
		Short: "List the holders of the locks in a store, or sweep the dead ones",
		Long: `locks prints one line per holder of every lock kept in DIR (see "kv DIR
lock"): its name and slot, its fencing token, pid, host, age, and whether
it is alive or dead, with the reason (a holder file still locked, no such
process, a pid reused, a boot that is over, not renewed for longer than
--stale-after). Holders are judged as an acquirer with the same
--strategy and --stale-after would judge them. It reads without the
store's writer lock.

"locks sweep" removes the holders judged dead, each only if its key is
still at the revision judged, and the holder files no process holds, and
prints what it removed (with --json, one object per holder removed, as
the listing prints it).`,
		Example: `  kv data locks
  kv data locks --json | jq 'select(.alive == false)'
  kv data locks sweep
  kv data locks --strategy time-only --stale-after 1m`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 2 && a[1] != "sweep" {
				return usagef("locks: %q is not sweep\nUsage: kv %s", a[1], cmd.Use)
			}
			if err := requireDir(a[0]); err != nil {
				return err
			}
			opts, err := lockerOptions(g, o.staleAfter, o.slots, o.strategy, g.wait)
			if err != nil {
				return err
			}
			l, err := filelock.Open(a[0], opts...)
			if err != nil {
				return err
			}
			ctx := context.Background()
			w := cmd.OutOrStdout()
			if len(a) == 2 {
				removed, err := l.Sweep(ctx)
				if errors.Is(err, kv.ErrLocked) {
					return lockedError(err, g.wait)
				}
				if err != nil {
					return err
				}
				if o.json {
					// The holders removed, as the listing prints them.
					return kvcli.PrintLocksJSON(w, removed)
				}
				return kvcli.PrintSwept(w, removed)
			}
			infos, err := l.List(ctx)
			if err != nil {
				return err
			}
			if o.json {
				return kvcli.PrintLocksJSON(w, infos)
			}
			return kvcli.PrintLocks(w, infos)
		},
	}
	jsonFlag(c, &o.json, "print one JSON object per holder (with sweep: per holder removed)")
	lockFlags(c.Flags(), &o.staleAfter, &o.slots, &o.strategy)
	c.Flags().MarkHidden("slots")
	g.waitFlag(c) // sweep's deletes wait for a busy store as writers do
	c.ValidArgsFunction = func(_ *cobra.Command, a []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(a) == 0 {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		if len(a) == 1 {
			return []cobra.Completion{"sweep"}, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return c
}
