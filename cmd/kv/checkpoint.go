package main

import (
	"encoding/json"
	"fmt"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/spf13/cobra"
)

func newCheckpointCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "checkpoint DIR",
		Short: "Write a snapshot now and delete the log segments it covers",
		Long: `checkpoint opens the store (running recovery), seals the log segment
being written, writes a snapshot of every key that covers the sealed
segments, makes it durable, and deletes those segments but the newest
4 MiB of them, kept for watchers in other processes (kv DIR watch); no
open ever reads them again. It prints the
snapshot's revision and key count and the segment the log continues in.
The store checkpoints by itself every --checkpoint-bytes of log; this is
for doing it now, before a backup or to make the next open fast.

checkpoint needs the writer's lock (see --wait); it refuses a DIR that
does not exist.`,
		Example: `  kv data checkpoint
  kv data checkpoint --wait 10s    # while another process may have the store open
  kv data checkpoint --json | jq .revision`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			stop := onInterrupt(cmd.ErrOrStderr(), func() string {
				return "the checkpoint did not finish; nothing is lost: the log stays until a snapshot that covers it is durable"
			})
			defer stop()
			s, err := g.openWrite(cmd.Context(), a[0], false)
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
			seg := "log." + st.Segment.String()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"revision": st.Revision, "keys": st.Keys, "segment": seg})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "snapshot at revision %d, %s; log continues in %s\n", st.Revision, kvcli.Plural(int64(st.Keys), "key"), seg)
			return err
		},
		ValidArgsFunction: completeDir,
	}
	jsonFlag(c, &asJSON, "print the result as a JSON object")
	g.waitFlag(c)
	g.storeFlags(c)
	return c
}
