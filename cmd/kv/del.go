package main

import (
	"encoding/json"
	"errors"
	"fmt"

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
			deleted := 1
			rev, err := w.Delete(key)
			if errors.Is(err, kv.ErrNotFound) {
				deleted, rev, err = 0, s.Revision(), nil
			}
			if err != nil {
				return fencedError(err, fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(jsonWrite{Op: "del", jsonKey: keyJSON(key), Deleted: &deleted, Revision: rev})
			}
			if deleted == 0 {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted 0 (no key %q)\n", key)
			} else {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted 1, revision %d\n", rev)
			}
			return err
		},
		ValidArgsFunction: completeDirKey,
	}
	jsonFlag(c, &asJSON, "print the result as a JSON object")
	fence.add(c)
	g.waitFlag(c)
	g.storeFlags(c)
	return c
}
