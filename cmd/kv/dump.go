package main

import (
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
	"github.com/spf13/cobra"
)

type dumpOpts struct {
	json     bool
	readOnly bool
	salvage  bool
}

func newDumpCmd(g *globalOpts) *cobra.Command {
	o := &dumpOpts{}
	c := &cobra.Command{
		Use:   "dump DIR",
		Short: "Recover the store and print every key",
		Long: `dump opens the data directory, which runs recovery: load the snapshot,
replay the log segments it does not cover, and, if it replayed anything,
checkpoint (start a new segment, write a snapshot covering the replayed
ones, delete them), as the article's store does. Then it prints one
KEY=VALUE line per key, sorted by key bytes, and nothing else. A key or
value that is not printable UTF-8, holds '=' or a newline, starts with a
double quote or has a space at either end is printed Go-quoted, and so is
a key with a space or a leading '#': "kv DIR load" reads the lines back,
so "kv A dump | kv B load" copies a store.

dump is a read command (see "kv --help", Locks): beside a live writer it
prints what the writer has made durable, read-only, and writes nothing.
With --read-only it never writes: it recovers in memory only.

When the checkpoint fails (a full disk), dump still prints every key,
then says so on stderr and exits 1: the log keeps every record, and the
next open replays it again.

With --salvage, dump reads a damaged directory that recovery refuses:
every snapshot entry and log record that can be read, applied in
revision order, printed as above; and on stderr what could not be read
(damaged byte ranges, the keys a damaged snapshot range may have held,
revisions no readable record holds, missing segments). It changes
nothing and takes no lock. It exits 0 when nothing was lost, 1 when
something was: the keys printed are then what survives, and after a
lost revision any key may differ from what the store held. Run it before
'kv DIR repair'.

On a terminal, a progress line on stderr shows a long recovery (bytes
read, of how many, and the rate) and the keys printed. Ctrl-C during
recovery loses nothing: recovery survives being killed, and the next
open starts it again.`,
		Example: `  kv data dump
  kv data dump --json | jq .
  kv data dump --read-only      # recover in memory only; write nothing
  kv old dump | kv new load     # copy a store
  kv data dump --salvage > survived.txt`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if o.salvage {
				return runSalvage(cmd.OutOrStdout(), cmd.ErrOrStderr(), g, a[0], o)
			}
			if empty, err := emptyDir(a[0]); err != nil || empty {
				if empty {
					// What a writer killed before its first record
					// leaves: no store yet, so no key; nothing is made.
					fmt.Fprintf(cmd.ErrOrStderr(), "kv: %s holds no store yet (the directory is empty): no keys\n", a[0])
				}
				return err
			}
			stage := "recovering " + a[0]
			stop := onInterrupt(cmd.ErrOrStderr(), func() string {
				return stage + "; nothing is lost: a recovery survives being killed, and the next open starts it again"
			})
			defer stop()
			s, err := g.openRead(a[0], !o.readOnly)
			if err != nil {
				return err
			}
			defer s.Close()
			stage = "printing the keys of " + a[0]
			if err := runDump(cmd.OutOrStdout(), cmd.ErrOrStderr(), s, o); err != nil {
				return err
			}
			if st := s.Stats(); o.readOnly && st.RecoveryUnvouched > 0 && st.RecoveryWriter == 0 {
				return exitError{code: exitPartial} // openRead said what is left out
			}
			return nil
		},
		ValidArgsFunction: completeDir,
	}
	jsonFlag(c, &o.json, "print one JSON object per key, with its revisions")
	c.Flags().BoolVar(&o.readOnly, "read-only", false, "recover in memory, write nothing")
	c.Flags().BoolVar(&o.salvage, "salvage", false, "read what survives in a damaged directory, change nothing, report what is lost on stderr")
	g.storeFlags(c)
	return c
}

// emptyDir reports whether dir exists and holds no store: empty, or
// holding only what a crash leaves of a store being created before its
// first record (recovery.DirEmpty).
func emptyDir(dir string) (bool, error) {
	if err := requireDir(dir); err != nil {
		return false, err
	}
	kind, err := recovery.Identify(vfs.OS, dir)
	if err != nil {
		return false, nil // the open says what is wrong
	}
	return kind == recovery.DirEmpty, nil
}

// runDump checkpoints what the open replayed, as the article's recovery
// does, prints every key of s and closes it. A checkpoint that fails does
// not keep the keys from being printed: its error comes after them. A
// store opened read-only (beside a live writer: see openRead) is not
// checkpointed.
func runDump(w, stderr io.Writer, s *kv.Store, o *dumpOpts) error {
	var ckptErr error
	if !o.readOnly && s.Stats().RecoveryReplayed > 0 {
		// The article's recovery ends with a checkpoint; a plain open
		// leaves a short log for the next one to replay.
		if ckptErr = s.Checkpoint(); errors.Is(ckptErr, kv.ErrReadOnly) {
			ckptErr = nil // beside a live writer, whose checkpoints these are
		}
	}
	kp := newProgress(stderr, "dump", "keys", progressDelay())
	kp.setTotal(int64(s.Len()))
	// Each entry is printed before the next step: the scan's views need
	// no copy. Damage in the snapshot's image stops it with an error, and
	// the dump fails with it rather than end short as if complete.
	var scanErr error
	entries := func(yield func(kv.Entry) bool) {
		for e, err := range s.ScanView(nil, nil) {
			if err != nil {
				scanErr = err
				return
			}
			if !yield(e) {
				return
			}
		}
	}
	err := printEntries(w, entries, o.json, func() { kp.add(1) })
	kp.done()
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	if ckptErr != nil {
		return fmt.Errorf("every key is printed above, but the checkpoint after the recovery failed, and the next open replays the log again: %w", ckptErr)
	}
	return nil
}

// runSalvage prints what kv.Salvage reads of dir to w, and what it could
// not read to report.
func runSalvage(w, report io.Writer, g *globalOpts, dir string, o *dumpOpts) error {
	if err := requireDir(dir); err != nil {
		return err
	}
	opts, err := g.storeOptions(true)
	if err != nil {
		return err
	}
	rep, err := kv.Salvage(dir, opts)
	if err != nil {
		return err
	}
	entries := func(yield func(kv.Entry) bool) {
		for e := range rep.Map.All(nil, nil) {
			if !yield(*e) {
				return
			}
		}
	}
	if err := printEntries(w, entries, o.json, nil); err != nil {
		return err
	}
	lines := salvageLines(rep)
	for _, l := range lines {
		fmt.Fprintf(report, "kv: salvage: %s\n", l)
	}
	if !rep.Whole() {
		return exitError{code: exitFailed, msg: fmt.Sprintf("salvage: %d keys read; what could not be read is listed above", rep.Map.Len())}
	}
	return nil
}

// salvageLines says, a line each, what a salvage could not read.
func salvageLines(rep *recovery.SalvageReport) []string {
	var out []string
	if rep.MarkerErr != nil {
		out = append(out, describe(rep.MarkerErr))
	}
	if sv := rep.Snapshot; sv != nil {
		file := path.Join(rep.Dir, snapshot.Name)
		if !sv.MetaOK {
			out = append(out, fmt.Sprintf("%s: its first record (covered segment, revision) is unreadable", file))
		}
		for _, l := range sv.Lost {
			out = append(out, fmt.Sprintf("%s bytes %d-%d unreadable: the keys %s, if any, are lost", file, l.From, l.To, keySpan(l.After, l.Before)))
		}
		for _, l := range sv.Index {
			out = append(out, fmt.Sprintf("%s bytes %d-%d unreadable: the image's index or footer, which holds no key", file, l.From, l.To))
		}
		if sv.LeasesUnknown {
			out = append(out, fmt.Sprintf("%s: its leases are unreadable", file))
		}
		if sv.Disordered > 0 {
			out = append(out, fmt.Sprintf("%s: %d entries out of key order dropped", file, sv.Disordered))
		}
	}
	for _, s := range rep.Segments {
		for _, d := range s.Damaged {
			out = append(out, fmt.Sprintf("%s bytes %d-%d unreadable", s.File, d.From, d.To))
		}
		if s.Undecodable > 0 {
			out = append(out, fmt.Sprintf("%s: %d records that check out but do not decode", s.File, s.Undecodable))
		}
	}
	for _, m := range rep.Missing {
		out = append(out, fmt.Sprintf("%s is missing", wal.SegmentPath(rep.Dir, m)))
	}
	for _, g := range rep.Gaps {
		if g.From == g.To {
			out = append(out, fmt.Sprintf("revision %s: no readable record holds it; any key may differ from what the store held after it", g))
			continue
		}
		out = append(out, fmt.Sprintf("revisions %s: no readable record holds them; any key may differ from what the store held after them", g))
	}
	for _, r := range rep.Unapplied {
		out = append(out, fmt.Sprintf("revision %d read but not applied: it does not apply to what was read before it", r))
	}
	return out
}

// keySpan words the keys strictly between after and before (nil: no
// bound).
func keySpan(after, before []byte) string {
	switch {
	case after == nil && before == nil:
		return "of the whole snapshot"
	case after == nil:
		return "before " + opmodel.Show(before)
	case before == nil:
		return "after " + opmodel.Show(after)
	}
	return "between " + opmodel.Show(after) + " and " + opmodel.Show(before)
}
