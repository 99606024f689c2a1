package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/killtest/crashsim"
	"github.com/spf13/cobra"
)

type crashsimOpts struct {
	model     string
	seed      uint64
	maxStates int
	samples   int
	ops       int
	json      bool
	noNested  bool
	shrink    bool
}

func newCrashsimCmd(g *globalOpts) *cobra.Command {
	o := &crashsimOpts{}
	c := &cobra.Command{
		Use:   "crashsim WORKLOAD",
		Short: "Check every state a crash can leave, by simulation",
		Long: `crashsim runs a workload on a recording file system, then builds every
state a crash could leave after each recorded event under the chosen
crash models, recovers each one, and checks that no acknowledged
operation is lost, none is applied twice, recovery never reports a crash
state as corruption, and recovering a crashed recovery gives the same map
(nested recovery: the recovery of every distinct state is itself traced
and crashed at every point).

Workloads: recovery (the article's 17 operations, recovered), torn-recovery
(the same with a torn tail), torn-writes (writes into a directory whose
log ends torn), writes (--ops mixed writes, one at a time), checkpoint
(the same in waves, racing background checkpoints), backup (the same
with online backups into the directory racing them, every other one
with a checkpoint inside it: every backup a
crash leaves must be the map at its revision), values (values that
hold record frames and runs of zeros), never (writes under --sync never,
durable at each Sync), fences (transactions around a lock: fenced writes,
stale tokens, compares, reads as promises), image (writes over a
store whose snapshot is an image, racing checkpoints that swap the next
image in, with reads across every swap), random (generated from
--seed; a failure is shrunk to the fewest operations that still fail),
all.

Models: process (the page cache survives), machine (power loss: synced
data, plus any prefix of unsynced writes, torn at 512 bytes, and of
unsynced renames, creates and unlinks), pessimistic (any subset of unsynced
4 KiB pages and namespace operations, and any size the file had since
its last sync, sampled), fsync-failure (the k-th sync fails and loses its
writes for good; the program reopens the store in the same boot), all.

Exit status 0 when no state is bad, 1 otherwise.`,
		Example: `  kv crashsim recovery
  kv crashsim recovery --bug double-apply --model process
  kv crashsim writes --ops 300 --model all
  kv crashsim random --seed 7 --ops 200`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			cfg, err := o.config(g)
			if err != nil {
				return err
			}
			var ws []crashsim.Workload
			switch a[0] {
			case "random":
				if o.shrink {
					n, rep, err := crashsim.Shrink(o.ops, o.seed, cfg)
					if err != nil {
						return err
					}
					return o.print(cmd, []*crashsim.Report{rep}, fmt.Sprintf("(shrunk to %d operations)", n))
				}
				ws = []crashsim.Workload{crashsim.RandomWorkload(o.ops, o.seed)}
			default:
				all, err := crashsim.Workloads(o.ops, o.seed)
				if err != nil {
					return err
				}
				for _, w := range all {
					if a[0] == "all" || w.Name == a[0] {
						ws = append(ws, w)
					}
				}
				if len(ws) == 0 {
					return usagef("crashsim: unknown workload %q (one of %s, random, all)", a[0], strings.Join(crashsim.WorkloadNames(), ", "))
				}
			}
			var reps []*crashsim.Report
			for _, w := range ws {
				if !o.json {
					fmt.Fprintf(cmd.OutOrStdout(), "== %s: %s\n", w.Name, w.Doc)
				}
				rep, err := crashsim.Check(w, cfg)
				if err != nil {
					return err
				}
				if !o.json {
					rep.Print(cmd.OutOrStdout())
				}
				reps = append(reps, rep)
			}
			return o.print(cmd, reps, "")
		},
	}
	f := c.Flags()
	f.StringVar(&o.model, "model", "process,machine", "crash models: process, machine, pessimistic, fsync-failure, or all (comma-separated)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the generated workloads and of sampling")
	f.IntVar(&o.maxStates, "max-states", 64, "machine states per crash point before sampling")
	f.IntVar(&o.samples, "samples", 16, "pessimistic states sampled per crash point")
	f.IntVar(&o.ops, "ops", 150, "operations of the writes, checkpoint and random workloads")
	jsonFlag(c, &o.json, "print the reports as one JSON array")
	f.BoolVar(&o.noNested, "no-nested", false, "skip crashing the recovery of each crash state")
	f.BoolVar(&o.shrink, "shrink", true, "shrink a failing random workload")
	return c
}

func (o *crashsimOpts) config(g *globalOpts) (crashsim.Config, error) {
	cfg := crashsim.Config{Seed: o.seed, MaxStates: o.maxStates, Pessimistic: o.samples, NoNested: o.noNested}
	bug, err := variant.Parse(g.bug)
	if err != nil {
		return cfg, usageError{err}
	}
	cfg.Bug = bug
	for _, m := range strings.Split(o.model, ",") {
		switch m = strings.TrimSpace(m); m {
		case "all":
			cfg.Models = crashsim.Models()
		case string(crashsim.Process), string(crashsim.Machine), string(crashsim.Pessimistic), string(crashsim.FsyncFailure):
			cfg.Models = append(cfg.Models, crashsim.Model(m))
		default:
			return cfg, usagef("--model: %q is not one of process, machine, pessimistic, fsync-failure, all", m)
		}
	}
	return cfg, nil
}

func (o *crashsimOpts) print(cmd *cobra.Command, reps []*crashsim.Report, note string) error {
	bad := false
	for _, r := range reps {
		bad = bad || !r.Ok()
	}
	if o.json {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(reps); err != nil {
			return err
		}
	} else if note != "" {
		for _, r := range reps {
			fmt.Fprintf(cmd.OutOrStdout(), "== %s %s\n", r.Workload, note)
			r.Print(cmd.OutOrStdout())
		}
	}
	if bad {
		return exitError{code: exitFailed, msg: "crashsim: bad states found"}
	}
	return nil
}
