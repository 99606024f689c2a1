package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kvstore/kv/filelock"
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
prints what it removed.`,
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
			opts, err := lockerOptions(g, o.staleAfter, o.slots, o.strategy)
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
				if err != nil {
					return err
				}
				for _, h := range removed {
					fmt.Fprintf(w, "swept %s slot %d: token %d, pid %d on %s: %s\n", h.Name, h.Slot, h.Token, h.PID, h.Host, h.Reason)
				}
				_, err = fmt.Fprintf(w, "%d dead holder(s) removed\n", len(removed))
				return err
			}
			infos, err := l.List(ctx)
			if err != nil {
				return err
			}
			if o.json {
				return printLocksJSON(w, infos)
			}
			return printLocks(w, infos)
		},
	}
	jsonFlag(c, &o.json, "print one JSON object per holder")
	lockFlags(c.Flags(), &o.staleAfter, &o.slots, &o.strategy)
	c.Flags().MarkHidden("slots")
	g.storeFlags(c)
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

func printLocks(w io.Writer, infos []filelock.Info) error {
	if len(infos) == 0 {
		_, err := fmt.Fprintln(w, "no locks held")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSLOT\tTOKEN\tPID\tHOST\tAGE\tSTATE\tWHY")
	now := time.Now()
	for _, h := range infos {
		state := "alive"
		if !h.Alive {
			state = "dead"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", h.Name, h.Slot, h.Token, h.PID, h.Host, age(now, h.Acquired), state, h.Reason)
	}
	return tw.Flush()
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// jsonLock is one holder in "locks --json".
type jsonLock struct {
	Name       string    `json:"name"`
	Slot       int       `json:"slot"`
	Token      int64     `json:"token"`
	PID        int       `json:"pid"`
	PIDStart   uint64    `json:"pid_start"`
	BootID     string    `json:"boot_id"`
	Host       string    `json:"host"`
	Nonce      string    `json:"nonce"`
	HolderFile string    `json:"holder_file,omitempty"`
	Acquired   time.Time `json:"acquired"`
	Renewed    time.Time `json:"renewed"`
	AgeSeconds float64   `json:"age_seconds"`
	Strategy   string    `json:"strategy"`
	Alive      bool      `json:"alive"`
	Reason     string    `json:"reason"`
}

func printLocksJSON(w io.Writer, infos []filelock.Info) error {
	enc := json.NewEncoder(w)
	now := time.Now()
	for _, h := range infos {
		if err := enc.Encode(jsonLock{
			Name: h.Name, Slot: h.Slot, Token: h.Token, PID: h.PID, PIDStart: h.PIDStart, BootID: h.BootID,
			Host: h.Host, Nonce: h.Nonce, HolderFile: h.HolderFile, Acquired: h.Acquired, Renewed: h.Renewed,
			AgeSeconds: now.Sub(h.Acquired).Seconds(), Strategy: h.Strategy, Alive: h.Alive, Reason: h.Reason,
		}); err != nil {
			return err
		}
	}
	return nil
}
