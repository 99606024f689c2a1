package main

import (
	"errors"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

func newDelCmd(g *globalOpts) *cobra.Command {
	var fence fenceFlag
	var asJSON bool
	c := &cobra.Command{
		Use:     "del DIR KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a key, durably, and print how many keys were deleted",
		Long: `del removes KEY and prints "deleted 1, revision N" once the delete is
durable. A missing key is not an error, as with etcdctl: del prints
"deleted 0", exits 0 and commits nothing.

del needs the writer's lock (see --wait); it refuses a DIR that does not
exist.`,
		Example: `  kv data del k3
  kv data del k3 --json | jq .deleted`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			stop := onInterrupt(cmd.ErrOrStderr(), func() string {
				return "the delete was not acknowledged: it may or may not be committed ('kv DIR get KEY' tells)"
			})
			defer stop()
			s, err := g.openWrite(cmd.Context(), a[0], false)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			deleted := true
			rev, err := w.Delete(key)
			if errors.Is(err, kv.ErrNotFound) {
				deleted, rev, err = false, s.Revision(), nil
			}
			if err != nil {
				return fencedError(err, fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			return kvcli.PrintDel(cmd.OutOrStdout(), key, deleted, rev, asJSON)
		},
		ValidArgsFunction: completeDirKey,
	}
	jsonFlag(c, &asJSON, "print the result as a JSON object")
	fence.add(c)
	g.waitFlag(c)
	g.storeFlags(c)
	return c
}
