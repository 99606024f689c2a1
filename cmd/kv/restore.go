package main

import (
	"encoding/json"
	"fmt"

	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

func newRestoreCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "restore FILE DIR",
		Short: "Make a new data directory from a backup",
		Long: `restore makes DIR, which must not exist or be empty, a data directory
holding the backup in FILE (written by "kv DIR backup" or Store.Backup;
a snapshot file copied out of a data directory is one too). It verifies
every checksum of FILE as it copies it in as DIR's snapshot, creates the
log segment that follows it, syncs both, then opens DIR read-only and
checks that its map has the backup's content hash (FORMAT.md, "Backup").

The restored store is at the backup's revision, and its next write gets
the next one. A damaged backup is refused with its offset, and only the
empty directory and its LOCK file are left; a restore that dies part way
leaves a directory that opens empty or is refused: remove it and restore
again. It prints the revision, the number of keys and the content hash.`,
		Example: `  kv restore /backups/data.kvbackup data2
  kv data2 stat
  kv restore /backups/data.kvbackup data3 --json | jq .revision`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts, err := g.storeOptions(false)
			if err != nil {
				return err
			}
			d, err := kv.Restore(a[0], a[1], opts)
			if err != nil {
				return backupError(err)
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(digestJSON{d.Revision, d.Keys, d.Leases, d.Hash.String(), nil})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored revision %d: %d keys, %d leases, hash %s\n", d.Revision, d.Keys, d.Leases, d.Hash)
			return nil
		},
	}
	jsonFlag(c, &asJSON, "print the restored store's description as a JSON object")
	g.storeFlags(c)
	return c
}
