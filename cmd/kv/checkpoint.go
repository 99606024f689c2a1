package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

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
