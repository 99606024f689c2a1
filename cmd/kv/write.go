package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func newPutCmd(g *globalOpts) *cobra.Command {
	var fence fenceFlag
	c := &cobra.Command{
		Use:   "put DIR KEY VALUE",
		Short: "Set a key, durably, and print the revision",
		Long: `put sets KEY to VALUE and prints "revision N" once the write is durable
(under the default --sync always). It creates DIR if needed. A KEY or
VALUE that starts with a double quote is read as a Go-quoted string.`,
		Example: `  kv data put k1 v1
  kv data put greeting '"hello\nworld"'
  kv data put state done --fence nightly:$KV_FENCE_TOKEN   # only while the lock is held with that token`,
		Args: args(3, 3),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			val, err := parseArg("value", a[2])
			if err != nil {
				return err
			}
			s, err := g.open(a[0], false, false)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			rev, err := w.Put(key, val)
			if err != nil {
				return fencedError(err, fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revision %d\n", rev)
			return err
		},
	}
	fence.add(c)
	return c
}

func newDelCmd(g *globalOpts) *cobra.Command {
	var fence fenceFlag
	c := &cobra.Command{
		Use:     "del DIR KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a key, durably, and print the revision",
		Long:    `del removes KEY and prints "revision N" once the delete is durable. A missing key is an error and commits nothing.`,
		Example: `  kv data del k3`,
		Args:    args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			s, err := g.open(a[0], true, false)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			rev, err := w.Delete(key)
			if err != nil {
				return fencedError(keyError(key, err), fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revision %d\n", rev)
			return err
		},
	}
	fence.add(c)
	return c
}

func newAddCmd(g *globalOpts) *cobra.Command {
	var fence fenceFlag
	c := &cobra.Command{
		Use:   "add DIR KEY N",
		Short: "Add N to a key's integer value, durably, and print the new value",
		Long: `add adds the signed integer N to KEY's value, a decimal int64 (a missing
key counts as 0), and prints the new value once the write is durable. The
log records the delta, not the result, so applying it twice would show.`,
		Example: `  kv data add c 1
  kv data add balance -- -250`,
		Args: args(3, 3),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(a[2], 10, 64)
			if err != nil {
				return usagef("add: %q is not a decimal int64", a[2])
			}
			s, err := g.open(a[0], false, false)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			v, _, err := w.Add(key, n)
			if err != nil {
				return fencedError(keyError(key, err), fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d\n", v)
			return err
		},
	}
	fence.add(c)
	return c
}

type scanOpts struct{ json bool }

func newScanCmd(g *globalOpts) *cobra.Command {
	o := &scanOpts{}
	c := &cobra.Command{
		Use:   "scan DIR [PREFIX]",
		Short: "Print the keys that start with a prefix, as dump does",
		Example: `  kv data scan user/
  kv data scan --json`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			var prefix []byte
			if len(a) == 2 {
				var err error
				if prefix, err = parseArg("prefix", a[1]); err != nil {
					return err
				}
			}
			s, err := g.open(a[0], true, true)
			if err != nil {
				return err
			}
			defer s.Close()
			return printEntries(cmd.OutOrStdout(), s.ScanPrefix(prefix), o.json)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON object per key, with its revisions")
	return c
}

func newCheckpointCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "checkpoint DIR",
		Short:   "Write a snapshot now and delete the log segments it covers",
		Example: `  kv data checkpoint`,
		Args:    args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := g.open(a[0], true, false)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.Checkpoint(); err != nil {
				return err
			}
			st := s.Stats()
			if err := s.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "snapshot at revision %d, %d keys; log continues in %s\n",
				st.Revision, st.Keys, "log."+st.Segment.String())
			return err
		},
	}
}
