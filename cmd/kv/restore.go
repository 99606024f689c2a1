package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

func newRestoreCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	var above int64
	c := &cobra.Command{
		Use:   "restore FILE|- DIR",
		Short: "Make a new data directory from a backup",
		Long: `restore makes DIR, which must not exist or be empty, a data directory
holding the backup in FILE (written by "kv DIR backup" or Store.Backup;
a snapshot file copied out of a data directory is one too, of any
version, an image included). With "-" it reads the backup from standard
input ("kv DIR backup -" writes one there), spooled to a temporary file
in $TMPDIR that it removes: it reads the backup twice. It verifies
every checksum of FILE as it copies it in as DIR's snapshot, creates the
log segment that follows it, syncs both, then opens DIR read-only and
checks that its map has the backup's content hash (FORMAT.md, "Backup").

The restored store is at the backup's revision, and its next write gets
the next one. A backup older than the store it came from therefore gives
out again the revisions that store gave after the backup, fencing tokens
included. --above REV prevents it: the restored store's next write gets a
revision above both the backup's and REV. Give the old store's revision
(kv DIR stat on it, if it still reads) or the highest token its lock
holders were given. The floor is written to the log and synced before
the snapshot is in place: no crash leaves the backup's map below it. A
floor must leave a revision for a write: the highest is
9223372036854775806 (2^63−2), whose store's next write gets 2^63−1.

A damaged backup is refused with its offset, and only the empty
directory and its LOCK file are left; a restore that dies part way
leaves a directory that opens empty or is refused: remove it and restore
again. It prints the backup's revision, the number of keys and the
content hash, and with --above, the revision the store continues from.`,
		Example: `  kv restore /backups/data.kvbackup data2
  kv data2 stat
  kv restore /backups/data.kvbackup data3 --json | jq .revision
  kv data stat                                  # the old store: revision 51234
  kv restore /backups/data.kvbackup data4 --above 51234
  ssh host 'kv data backup -' | kv restore - data5`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			if above < 0 {
				return usagef("--above %d: a revision is 0 or more", above)
			}
			opts, err := g.storeOptions(false)
			if err != nil {
				return err
			}
			file := a[0]
			if file == "-" {
				tmp, err := spool(cmd.InOrStdin())
				if err != nil {
					return err
				}
				defer vfs.OS.Remove(tmp)
				file = tmp
			}
			d, err := kv.Restore(file, a[1], opts, kv.RestoreAbove(kv.Revision(above)))
			if err != nil {
				return backupError(renameFile(err, file, a[0]))
			}
			// The floor, when it is above the backup's revision: the
			// restored store's revision.
			var floor *kv.Revision
			if f := kv.Revision(above); f > d.Revision {
				floor = &f
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(restoreJSON{digestJSON{d.Revision, d.Keys, d.Leases, d.Hash.String(), nil}, floor})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored revision %d: %s, %s, hash %s\n", d.Revision, kvcli.Plural(int64(d.Keys), "key"), kvcli.Plural(int64(d.Leases), "lease"), d.Hash)
			if floor != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "revisions continue above %d: the next write gets %d\n", *floor, *floor+1)
			}
			return nil
		},
	}
	jsonFlag(c, &asJSON, "print the restored store's description as a JSON object (with --above: \"above\", when above the backup's revision)")
	c.Flags().Int64Var(&above, "above", 0, "the restored store's revisions continue above `REV` too, not only above the backup's")
	g.storeFlags(c)
	return c
}

// restoreJSON is what restore --json prints: the backup's digest, and the
// floor its revisions continue above, when --above set one above the
// backup's revision.
type restoreJSON struct {
	digestJSON
	Above *kv.Revision `json:"above,omitempty"`
}

// spool copies r, a backup on standard input, into a new temporary file
// and returns its name: a restore reads the backup twice (to copy it in,
// then to compare the restored store with it). The file need not be
// durable: it is removed once the restore ends.
func spool(r io.Reader) (string, error) {
	name := filepath.Join(os.TempDir(), fmt.Sprintf("kv-restore-%d.tmp", os.Getpid()))
	f, err := vfs.OS.Create(name)
	if err != nil {
		return "", fmt.Errorf("restore -: spooling standard input: %w", err)
	}
	_, err = io.Copy(io.NewOffsetWriter(f, 0), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		vfs.OS.Remove(name)
		return "", fmt.Errorf("restore -: spooling standard input: %w", err)
	}
	return name, nil
}

// renameFile makes a damaged backup's error name the backup as the user
// gave it ("-"), not the spooled copy.
func renameFile(err error, spooled, given string) error {
	var ce *kv.CorruptError
	if spooled != given && errors.As(err, &ce) && ce.File == spooled {
		ce.File = given
	}
	return err
}
