package main

import (
	"strconv"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/spf13/cobra"
)

func newAddCmd(g *globalOpts) *cobra.Command {
	var fence fenceFlag
	var asJSON bool
	c := &cobra.Command{
		Use:   "add DIR KEY N",
		Short: "Add N to a key's integer value, durably, and print the new value",
		Long: `add adds the signed integer N to KEY's value, a decimal int64 (a missing
key counts as 0), and prints the new value once the write is durable. The
log records the delta, not the result, so applying it twice would show.
A negative N needs no "--": kv data add c -5.

add needs the writer's lock (see --wait). It refuses a DIR that does not
exist, which is most likely a typo, unless --create is given.`,
		Example: `  kv data add c 1
  kv data add balance -250
  kv data add --create visits 1
  kv data add c 1 --json | jq -r .value`,
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
			stop := onInterrupt(cmd.ErrOrStderr(), func() string {
				return "the add was not acknowledged: it may or may not be committed ('kv DIR get KEY' tells)"
			})
			defer stop()
			s, err := g.openWrite(cmd.Context(), a[0], g.create)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			v, rev, err := w.Add(key, n)
			if err != nil {
				return fencedError(keyError(key, err), fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			return kvcli.PrintAdd(cmd.OutOrStdout(), key, v, rev, asJSON)
		},
		ValidArgsFunction: completeDirKey,
	}
	jsonFlag(c, &asJSON, "print the result as a JSON object")
	fence.add(c)
	g.createFlag(c)
	g.waitFlag(c)
	g.storeFlags(c)
	return c
}
