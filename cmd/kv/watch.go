package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type watchOpts struct {
	from  int64
	json  bool
	prev  bool
	count int
}

func newWatchCmd(g *globalOpts) *cobra.Command {
	o := &watchOpts{}
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
			if o.from < 0 {
				return usagef("--from %d: a revision is 1 or more (0: the next to commit)", o.from)
			}
			if o.count < 0 {
				return usagef("--count %d: a count of changes is 1 or more (0: no limit)", o.count)
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
			if o.prev {
				wopts = append(wopts, kv.WithPrev())
			}
			return printWatch(ctx, cmd.OutOrStdout(), kv.WatchDir(ctx, a[0], opts, prefix, kv.Revision(o.from), wopts...), o)
		},
	}
	c.Flags().Int64Var(&o.from, "from", 0, "the first revision to print (default: the next to commit)")
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON object per change: type, revision, the key's fields as get --json prints them, and prev")
	c.Flags().BoolVar(&o.prev, "prev", false, "print the value each change replaced (\"prev=VALUE\", or prev in JSON)")
	c.Flags().IntVar(&o.count, "count", 0, "stop after this many changes (0: no limit)")
	return c
}

// watchJSON is a change as watch --json prints it.
type watchJSON struct {
	Type     string `json:"type"` // "put" or "del"
	Revision int64  `json:"revision"`
	jsonEntry
	Prev *jsonEntry `json:"prev,omitempty"`
}

// printWatch prints the changes of events until they end, ctx ends or
// o.count are printed. Each line is written as it comes (the output may
// be a pipe read line by line).
func printWatch(ctx context.Context, w io.Writer, events func(yield func(kv.Event, error) bool), o *watchOpts) error {
	enc := json.NewEncoder(w)
	n := 0
	var werr error
	for ev, err := range events {
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil // Ctrl-C or SIGTERM: the watch's normal end
			}
			var ce *kv.CompactedError
			if errors.As(err, &ce) {
				return fmt.Errorf("watch: revision %d is no longer in the log; the oldest this directory can serve is %d (kv DIR dump prints the map; watch --from its revision + 1 after it)", ce.Requested, ce.Oldest)
			}
			return fmt.Errorf("watch: %s", describe(err))
		}
		typ := "put"
		if ev.Type == kv.EventDelete {
			typ = "del"
		}
		if o.json {
			j := watchJSON{Type: typ, Revision: int64(ev.Revision()), jsonEntry: toJSON(ev.Entry, true)}
			if ev.Type == kv.EventDelete {
				j.jsonEntry = jsonEntry{jsonKey: j.jsonKey, ModRev: ev.Entry.ModRev}
			}
			if ev.Prev != nil {
				p := toJSON(*ev.Prev, true)
				j.Prev = &p
			}
			werr = enc.Encode(j)
		} else {
			line := fmt.Sprintf("%d del %s", ev.Revision(), opmodel.ShowKey(ev.Entry.Key))
			if ev.Type == kv.EventPut {
				line = fmt.Sprintf("%d put %s", ev.Revision(), trimNewline(opmodel.DumpLine(ev.Entry.Key, ev.Entry.Value)))
			}
			if o.prev {
				if ev.Prev != nil {
					line += " prev=" + opmodel.Show(ev.Prev.Value)
				} else {
					line += " prev=(none)"
				}
			}
			_, werr = fmt.Fprintln(w, line)
		}
		if werr != nil {
			return werr
		}
		if n++; o.count > 0 && n >= o.count {
			return nil
		}
	}
	return nil
}

func trimNewline(s string) string {
	if len(s) > 0 && s[len(s)-1] == '\n' {
		return s[:len(s)-1]
	}
	return s
}
