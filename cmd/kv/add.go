package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

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
