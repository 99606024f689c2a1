package main

import (
	"fmt"

	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

func newCheckCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "check DIR",
		Short: "Verify every segment and the snapshot without changing anything",
		Long: `check reads the snapshot and every log segment, verifies every checksum,
the segment numbering and the revisions, and prints each problem with its
file and offset, then a summary. It takes no lock and writes nothing, so
it is safe on a directory another process has open.

Exit status: 0 when recovery would succeed (a torn tail, which a crash
leaves and recovery cuts, is reported but is not a failure), 1 when
something is corrupt.`,
		Example: `  kv data check`,
		Args:    args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			rep, err := checkDir(a[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, p := range rep.Problems {
				kind := "corrupt"
				if !p.Corrupt {
					kind = "note"
				}
				fmt.Fprintf(w, "%s: %s\n", kind, p)
			}
			live := 0
			for _, s := range rep.Segments {
				if !s.Covered {
					live++
				}
			}
			snap := "no snapshot"
			if rep.HasSnapshot && rep.SnapshotErr == nil {
				snap = fmt.Sprintf("snapshot covers log.%s at revision %d", rep.Snapshot.Covered, rep.Snapshot.Revision)
			} else if rep.SnapshotErr != nil {
				snap = "snapshot damaged"
			}
			if !rep.Clean() {
				n := 0
				for _, p := range rep.Problems {
					if p.Corrupt {
						n++
					}
				}
				fmt.Fprintf(w, "corrupt: %d problem(s); %s, %d segment(s) to replay; recovery will refuse this directory (see 'kv DIR repair')\n", n, snap, live)
				return exitError{code: exitFailed}
			}
			fmt.Fprintf(w, "ok: %s, %d segment(s) to replay, %d keys at revision %d\n", snap, live, rep.Keys, rep.Revision)
			return nil
		},
	}
}

// checkDir runs recovery.Check on an existing data directory.
func checkDir(dir string) (*recovery.Report, error) {
	if err := requireDir(dir); err != nil {
		return nil, err
	}
	return recovery.Check(vfs.OS, dir)
}
