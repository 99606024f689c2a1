package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type verifyOpts struct {
	against string
	json    bool
}

func newVerifyCmd(g *globalOpts) *cobra.Command {
	o := &verifyOpts{}
	c := &cobra.Command{
		Use:   "verify DIR|FILE --against FILE|DIR",
		Short: "Compare a store with a backup, or two backups, key by key",
		Long: `verify opens the data directory as the read commands do and compares its
map with the backup in FILE, key by key: the value, the create and mod
revisions and the version of every key, and the TTL, deadline and keys
of every lease. It verifies every checksum of FILE as it reads it.

Exit status 0 when the maps are the same: it prints the revision, the
number of keys and the content hash, and the two revisions when they
differ (a repair's skip record moves the revision without changing a
key). Exit status 8 with the first lease or key that differs (as diff's
1: both were read whole); exit status 1 when FILE is damaged, naming its
offset, or on any other error.

In place of DIR, a backup FILE: compared with the store in the directory
given to --against, or with the backup given to --against (two backups:
every key as above, and the number of leases). Offline, as "kv FILE
stat" is.`,
		Example: `  kv data backup /backups/data.kvbackup
  kv data verify --against /backups/data.kvbackup
  kv restore /backups/data.kvbackup data2 && kv data2 verify --against /backups/data.kvbackup
  kv data verify --against /backups/data.kvbackup --json | jq .same
  kv /backups/monday.kvbackup verify --against /backups/tuesday.kvbackup`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if o.against == "" {
				return usagef("verify: --against FILE is required")
			}
			var sd, d kv.Digest
			var err error
			switch {
			case isFile(a[0]) && isFile(o.against):
				sd, d, err = compareBackupFiles(a[0], o.against)
			case isFile(a[0]):
				// A backup against a directory: the directory's store is
				// compared with the backup.
				s, oerr := g.openRead(o.against, false)
				if oerr != nil {
					return oerr
				}
				defer s.Close()
				d, sd, err = s.CompareBackup(a[0])
			default:
				s, oerr := g.openRead(a[0], false)
				if oerr != nil {
					return oerr
				}
				defer s.Close()
				sd, d, err = s.CompareBackup(o.against)
			}
			var de *kv.DiffError
			switch {
			case errors.As(err, &de):
				at := "key " + opmodel.Show(de.Key)
				switch {
				case de.Key == nil && de.Lease == 0:
					at = "its leases"
				case de.Key == nil:
					at = fmt.Sprintf("lease %d", de.Lease)
				}
				return exitError{code: exitDiffers, msg: fmt.Sprintf("verify: %s differs from %s at %s: %s", a[0], o.against, at, de.Reason)}
			case err != nil:
				return backupError(err)
			}
			w := cmd.OutOrStdout()
			if o.json {
				return json.NewEncoder(w).Encode(struct {
					Same bool `json:"same"`
					digestJSON
					StoreRevision kv.Revision `json:"store_revision"`
				}{true, digestJSON{d.Revision, d.Keys, d.Leases, d.Hash.String(), nil}, sd.Revision})
			}
			fmt.Fprintf(w, "same map as %s: %s, %s, hash %s", o.against, kvcli.Plural(int64(d.Keys), "key"), kvcli.Plural(int64(d.Leases), "lease"), d.Hash)
			if sd.Revision == d.Revision {
				fmt.Fprintf(w, ", revision %d\n", d.Revision)
			} else {
				fmt.Fprintf(w, "; the store is at revision %d, the backup at %d\n", sd.Revision, d.Revision)
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.against, "against", "", "the backup to compare with (required)")
	jsonFlag(c, &o.json, `print {"same": true, revision (the backup's), keys, leases, hash, store_revision} when the maps are the same (a difference is an error)`)
	c.ValidArgsFunction = completeDir
	return c
}
