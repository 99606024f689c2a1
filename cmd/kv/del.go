package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

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
