package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/lockfile"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

type repairOpts struct {
	yes, json, verbose, salvage bool
	salvageFrom                 string // a salvage file to write after the repair
}

func newRepairCmd(g *globalOpts) *cobra.Command {
	o := &repairOpts{}
	c := &cobra.Command{
		Use:   "repair DIR",
		Short: "Make a corrupt directory recoverable again, keeping the evidence",
		Long: `repair is the explicit, logged way out of corruption that recovery
refuses. It copies every file it changes, or moves it, to NAME.broken
first (NAME.broken.1, .2, … when that name is taken: evidence is never
overwritten, not even by a rerun after a repair that crashed); then it
cuts the log at the first corrupt record and sets aside every later
segment, or, for a damaged snapshot, sets it aside and starts from an
empty snapshot that keeps revisions from going backwards. It prints each
step and which committed data it drops. It holds the directory's lock
throughout (see --wait).

Without --yes it only prints the plan, and refuses (exit 1) when the plan
drops committed records. The plan sums up what it drops: how many
records, their revisions and the files they are in (where a segment is
cut, which are set aside as NAME.broken), how many keys of a snapshot it
sets aside and from which key to which, and every unreadable range.
With --verbose it lists what it drops as far as it can be read: every
record (revision, operations, file and offset) and every key. When only
the entries of a snapshot are damaged (its first record reads, it holds
no lease, and the log after it is sound), the repair keeps every entry
that reads and loses only the keys in the damaged ranges, which the plan
names by the keys around them. 'kv DIR dump --salvage' prints what
survives beforehand.

With --salvage it keeps what can still be read of what it drops, as
sqlite's .recover does: it reads the directory as 'kv DIR dump --salvage'
does before it changes anything, repairs (keeping the evidence), then
writes, in one transaction, the final value of every salvaged key that
the repaired store lacks or holds differently, and deletes the keys the
salvage lacks. Final values, never the log's records again: an add is
not counted twice. It prints how many keys it kept, the revision of that
transaction, and what stays lost (the unreadable ranges, the revisions
no readable record holds). Without --yes it prints the plan and what the
salvage would keep. With --yes it first saves the salvage beside the
directory, as DIR.salvaged (a backup file: 'kv DIR.salvaged stat' reads
it), and removes that file once the keys are written: a repair that
stops part way, or a write of the keys that fails, says so, and
'kv DIR repair --salvage-from DIR.salvaged --yes' finishes the repair
and writes them. A torn tail needs no repair: recovery cuts it. A log
segment of a format version this build does not read, its checksums
holding, is no damage either: repair refuses it ('kv DIR check' says
format:), and the build that wrote it opens the directory.
Interrupted (Ctrl-C, a crash), a repair is safe to run again: it starts
from what the directory holds then, and keeps the earlier evidence.`,
		Example: `  kv data repair            # show the plan
  kv data repair --verbose  # and every record and key it drops
  kv data repair --yes      # carry it out
  kv data repair --salvage --yes  # and keep what can still be read of what it drops
  kv data repair --salvage-from data.salvaged --yes  # finish one that stopped
  kv data repair --json | jq -r '.drops[]'`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			dir := a[0]
			if err := requireDir(dir); err != nil {
				return err
			}
			// A directory that is not a store gets no LOCK either.
			if kind, err := recovery.Identify(vfs.OS, dir); err != nil && !recovery.IsCorrupt(err) {
				return err
			} else if !kind.HoldsStore() {
				return &recovery.NoStoreError{Dir: dir, Missing: kind == recovery.DirMissing}
			}
			stage := "planning the repair; nothing was changed"
			stop := onInterrupt(cmd.ErrOrStderr(), func() string { return stage })
			defer stop()
			lock, err := lockForRepair(dir, g.wait)
			if err != nil {
				return err
			}
			defer lock.Close()
			fsys, p := readProgress(cmd.ErrOrStderr(), vfs.OS, dir, "repair plan")
			plan, err := recovery.PlanRepair(fsys, dir)
			p.done()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			out := repairJSON{Steps: nonNilStrings(plan.Steps), Drops: nonNilStrings(plan.Drops),
				KeepThrough: uint64(plan.KeepThrough), Skip: uint64(plan.Skip)}
			var salvaged *recovery.SalvageReport
			var salvageMap *record.Map // the final values to write after the repair
			salvageFile := ""          // where they are saved until then
			if o.salvageFrom != "" {
				if o.salvage {
					return usageError{fmt.Errorf("--salvage and --salvage-from: the first salvages the directory, the second writes a salvage saved before; give one")}
				}
				if salvageMap, err = loadSalvage(o.salvageFrom); err != nil {
					return fmt.Errorf("--salvage-from: %w (nothing was changed)", err)
				}
				salvageFile = o.salvageFrom
				out.Salvage = &salvageJSON{Lost: []string{}}
			}
			if o.salvage && !plan.Empty() {
				// Read before anything changes: once the repair has
				// cut and set aside, the directory's live files no
				// longer hold what it dropped.
				opts, err := g.storeOptions(true)
				if err != nil {
					return err
				}
				if salvaged, err = kv.Salvage(dir, opts); err != nil {
					return fmt.Errorf("salvage: %w (nothing was changed)", err)
				}
				out.Salvage = &salvageJSON{Lost: nonNilStrings(salvageLines(salvaged))}
				salvageMap = salvaged.Map
			}
			if o.json && (plan.Empty() && salvageFile == "" || !o.yes) {
				if err := json.NewEncoder(w).Encode(out); err != nil {
					return err
				}
			}
			if plan.Empty() && salvageFile == "" {
				if !o.json {
					fmt.Fprintln(w, "nothing to repair: recovery accepts this directory")
				}
				return nil
			}
			if plan.Empty() {
				if !o.json {
					fmt.Fprintln(w, "nothing to repair: recovery accepts this directory")
					fmt.Fprintf(w, "salvage: %s saved %s to write where they differ\n", salvageFile, kvcli.Plural(salvageMap.Len(), "key"))
				}
				if !o.yes {
					return exitError{code: exitFailed, msg: "refusing to write the salvaged keys without --yes (nothing was changed)"}
				}
			} else if !o.json {
				fmt.Fprintln(w, "plan:")
				for _, s := range plan.Steps {
					fmt.Fprintf(w, "  %s\n", s)
				}
				fmt.Fprintf(w, "keeps every record through revision %d\n", plan.KeepThrough)
				fmt.Fprintf(w, "ends the log with a skip to revision %d, so that no revision is ever given twice (%s)\n", plan.Skip, plan.Floor)
				printSummary(w, plan, o.verbose)
			}
			if salvaged != nil {
				printSalvagePlan(io.Discard, plan, salvaged, out.Salvage)
				if !o.json {
					printSalvagePlan(w, plan, salvaged, out.Salvage)
				}
			}
			if !o.yes {
				return exitError{code: exitFailed, msg: "refusing to drop committed data without --yes (the plan above changes nothing until then)"}
			}
			if salvaged != nil {
				salvageFile = salvageFileName(dir)
				if err := saveSalvage(salvageFile, salvageMap); err != nil {
					return err
				}
				if !o.json {
					fmt.Fprintf(w, "salvage: saved in %s until the keys are written\n", salvageFile)
				}
			}
			stage = "the repair stopped part way; run it again to finish (the .broken files hold the originals)"
			if salvageFile != "" {
				stage = fmt.Sprintf("the repair stopped part way (the .broken files hold the originals); nothing salvaged was written yet: 'kv DIR repair --salvage-from %s --yes' finishes the repair and writes it", salvageFile)
			}
			err = plan.Apply(vfs.OS, func(step string) {
				if !o.json {
					fmt.Fprintf(w, "done: %s\n", step)
				}
			})
			if err != nil {
				if salvageFile != "" {
					return fmt.Errorf("repair stopped: %w (the .broken files hold the originals; nothing salvaged was written: 'kv DIR repair --salvage-from %s --yes' finishes the repair and writes it)", err, salvageFile)
				}
				return fmt.Errorf("repair stopped: %w (the .broken files hold the originals)", err)
			}
			if salvageMap != nil {
				stage = "the repair is done (the .broken files hold the originals); writing the salvaged keys, a transaction that commits whole or not at all"
				r, rev, err := restoreSalvaged(g, dir, lock, salvageMap)
				sj := out.Salvage
				sj.Restored, sj.Puts, sj.Deletes, sj.First, sj.Revision = r.Keys(), r.Puts, r.Deletes, uint64(r.First), uint64(r.Last)
				if err != nil {
					done := "none of them was written"
					if r.Keys() > 0 {
						done = fmt.Sprintf("%s were written, through revision %d", kvcli.Plural(r.Keys(), "key"), r.Last)
					}
					return fmt.Errorf("salvage: the repair is done (evidence: %s) and the store recovers through revision %d, but writing the salvaged keys failed: %w; %s. They are saved in %s: 'kv DIR repair --salvage-from %s --yes' writes them (again, where they differ)", evidenceNames(plan), rev, err, done, salvageFile, salvageFile)
				}
				if err := dropSalvage(salvageFile); err != nil {
					return fmt.Errorf("salvage: the keys are written, but removing %s, which holds them too, failed: %w", salvageFile, err)
				}
			}
			if o.json {
				out.Applied = true
				return json.NewEncoder(w).Encode(out)
			}
			fmt.Fprintln(w, "repaired: the next open recovers the kept records")
			if sj := out.Salvage; sj != nil {
				switch {
				case sj.Restored == 0:
					fmt.Fprintln(w, "salvage: every salvaged key holds its value already: nothing to write")
				case sj.First == sj.Revision:
					fmt.Fprintf(w, "salvage: kept %s (%d put, %d deleted) in one transaction, at revision %d\n", kvcli.Plural(sj.Restored, "key"), sj.Puts, sj.Deletes, sj.Revision)
				default:
					fmt.Fprintf(w, "salvage: kept %s (%d put, %d deleted) in transactions at revisions %d–%d\n", kvcli.Plural(sj.Restored, "key"), sj.Puts, sj.Deletes, sj.First, sj.Revision)
				}
				for _, l := range sj.Lost {
					fmt.Fprintf(w, "salvage: lost: %s\n", l)
				}
			}
			return nil
		},
		ValidArgsFunction: completeDir,
	}
	c.Flags().BoolVar(&o.yes, "yes", false, "carry out a plan that drops committed records")
	c.Flags().BoolVar(&o.salvage, "salvage", false, "keep what can still be read of what the repair drops: write its keys' final values after the repair")
	c.Flags().StringVar(&o.salvageFrom, "salvage-from", "", "write the salvage a 'repair --salvage --yes' saved in `FILE` (DIR.salvaged) and did not finish writing, after repairing what is left")
	c.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "list every record and key the plan drops, and every unreadable range")
	jsonFlag(c, &o.json, "print the plan, and whether it was applied, as a JSON object")
	g.waitFlag(c)
	return c
}

// repairJSON is repair's --json output.
type repairJSON struct {
	Steps       []string `json:"steps"`
	Drops       []string `json:"drops"`
	KeepThrough uint64   `json:"keep_through"`
	Skip        uint64   `json:"skip"`
	Applied     bool     `json:"applied"`
	// Salvage is what --salvage keeps and loses.
	Salvage *salvageJSON `json:"salvage,omitempty"`
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// lockForRepair takes the directory's writer lock, waiting up to wait
// for a holder to let it go.
func lockForRepair(dir string, wait time.Duration) (vfs.File, error) {
	deadline := time.Now().Add(wait)
	for {
		lock, err := vfs.OS.Lock(path.Join(dir, kv.LockName), true)
		switch {
		case err == nil:
			return lock, nil
		case !errors.Is(err, vfs.ErrLocked):
			return nil, err
		case time.Now().After(deadline):
			who := "another process"
			if pid := lockfile.Holder(vfs.OS, path.Join(dir, kv.LockName)); pid > 0 {
				who = fmt.Sprintf("process %d", pid)
			}
			msg := fmt.Sprintf("%s is open in %s; close it before repairing", dir, who)
			if wait > 0 {
				msg = fmt.Sprintf("gave up after --wait %v: %s", wait, msg)
			} else {
				msg += " (--wait DURATION waits for it)"
			}
			return nil, exitError{code: exitTempFail, msg: msg}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// maxUnreadable bounds the unreadable ranges the summary lists.
const maxUnreadable = 10

// printSummary sums up what plan drops: counts, revision ranges, files
// and key ranges (RepairPlan.Summary), and the unreadable ranges; verbose,
// it then lists every record and key, as far as they read.
func printSummary(w io.Writer, plan *recovery.RepairPlan, verbose bool) {
	for _, l := range plan.Summary() {
		fmt.Fprintln(w, l)
	}
	if verbose {
		for _, d := range plan.Drops {
			fmt.Fprintf(w, "drops %s\n", d)
		}
		printDropped(w, plan)
		return
	}
	for i, u := range plan.Unreadable {
		if i == maxUnreadable {
			fmt.Fprintf(w, "drops %d more unreadable ranges (--verbose lists them)\n", len(plan.Unreadable)-maxUnreadable)
			break
		}
		fmt.Fprintf(w, "drops unreadable %s\n", u)
	}
	if len(plan.Dropped)+len(plan.DroppedEntries) > 0 {
		fmt.Fprintln(w, "(--verbose lists every record and key it drops)")
	}
}

// printDropped lists what plan drops, record by record and key by key.
func printDropped(w io.Writer, plan *recovery.RepairPlan) {
	for _, d := range plan.Dropped {
		fmt.Fprintf(w, "drops revision %d at %s offset %d: %s\n", d.Record.Revision, d.File, d.Offset,
			strings.TrimPrefix(describeRecord(d.Record, nil), fmt.Sprintf("rev %d  ", d.Record.Revision)))
	}
	for _, e := range plan.DroppedEntries {
		fmt.Fprintf(w, "drops key %s=%s (revision %d) of %s\n", opmodel.Show(e.Entry.Key), opmodel.Show(e.Entry.Value), e.Entry.ModRev, e.File)
	}
	for _, u := range plan.Unreadable {
		fmt.Fprintf(w, "drops unreadable %s\n", u)
	}
}
