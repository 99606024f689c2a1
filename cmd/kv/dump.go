package main

import (
	"fmt"
	"io"

	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type dumpOpts struct {
	json     bool
	readOnly bool
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
key=value line per key, sorted by key bytes, and nothing else. Keys and values that are not printable
UTF-8, or hold '=' or a newline, are printed Go-quoted.

When the checkpoint fails (a full disk), dump still prints every key,
then says so on stderr and exits 1: the log keeps every record, and the
next open replays it again.`,
		Example: `  kv data dump
  kv data dump --json | jq .
  kv data dump --read-only      # recover in memory only; write nothing`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := g.open(a[0], true, o.readOnly)
			if err != nil {
				return err
			}
			defer s.Close()
			return runDump(cmd.OutOrStdout(), s, o)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON object per key, with its revisions")
	c.Flags().BoolVar(&o.readOnly, "read-only", false, "recover in memory, write nothing, take a shared lock")
	return c
}

// runDump checkpoints what the open replayed, as the article's recovery
// does, prints every key of s and closes it. A checkpoint that fails does
// not keep the keys from being printed: its error comes after them.
func runDump(w io.Writer, s *kv.Store, o *dumpOpts) error {
	var ckptErr error
	if !o.readOnly && s.Stats().RecoveryReplayed > 0 {
		// The article's recovery ends with a checkpoint; a plain open
		// leaves a short log for the next one to replay.
		ckptErr = s.Checkpoint()
	}
	if err := printEntries(w, s.Scan(nil, nil), o.json); err != nil {
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
