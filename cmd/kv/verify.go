package main

import (
	"bytes"
	"fmt"
	"iter"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type verifyOpts struct{ against string }

func newVerifyCmd(g *globalOpts) *cobra.Command {
	o := &verifyOpts{}
	c := &cobra.Command{
		Use:   "verify DIR --against FILE",
		Short: "Compare a store with a backup, key by key",
		Long: `verify opens the data directory as the read commands do and compares its
map with the backup in FILE, key by key: the value, the create and mod
revisions and the version of every key. It verifies every checksum of
FILE as it reads it.

Exit status 0 when the maps are the same: it prints the revision, the
number of keys and the content hash, and the two revisions when they
differ (a repair's skip record moves the revision without changing a
key). Exit status 1 with the first key that differs, or when FILE is
damaged, naming its offset.`,
		Example: `  kv data backup /backups/data.kvbackup
  kv data verify --against /backups/data.kvbackup
  kv restore /backups/data.kvbackup data2 && kv data2 verify --against /backups/data.kvbackup`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if o.against == "" {
				return usagef("verify: --against FILE is required")
			}
			s, err := g.open(a[0], true, true)
			if err != nil {
				return err
			}
			defer s.Close()
			next, stop := iter.Pull(s.Scan(nil, nil))
			defer stop()
			cur, more := next()
			var diff, diffKey string
			differ := func(key []byte, format string, args ...any) {
				diffKey, diff = opmodel.Show(key), fmt.Sprintf(format, args...)
			}
			// The whole backup is read, its checksums with it, even past
			// the first difference: a damaged backup is reported as such.
			d, err := kv.ReadBackup(o.against, nil, func(b kv.Entry) error {
				if diff != "" {
					return nil
				}
				switch {
				case more && bytes.Compare(cur.Key, b.Key) < 0:
					differ(cur.Key, "in the store, not in the backup")
					return nil
				case !more || bytes.Compare(cur.Key, b.Key) > 0:
					differ(b.Key, "in the backup, not in the store")
					return nil
				case !bytes.Equal(cur.Value, b.Value):
					differ(b.Key, "value %s in the store, %s in the backup", opmodel.Show(cur.Value), opmodel.Show(b.Value))
				case cur.CreateRev != b.CreateRev:
					differ(b.Key, "create revision %d in the store, %d in the backup", cur.CreateRev, b.CreateRev)
				case cur.ModRev != b.ModRev:
					differ(b.Key, "mod revision %d in the store, %d in the backup", cur.ModRev, b.ModRev)
				case cur.Version != b.Version:
					differ(b.Key, "version %d in the store, %d in the backup", cur.Version, b.Version)
				}
				cur, more = next()
				return nil
			})
			if err != nil {
				return backupError(err)
			}
			if diff == "" && more {
				differ(cur.Key, "in the store, not in the backup")
			}
			if diff != "" {
				return exitError{code: exitFailed, msg: fmt.Sprintf("verify: %s differs from %s at key %s: %s", a[0], o.against, diffKey, diff)}
			}
			sd, err := s.Hash()
			if err != nil {
				return err
			}
			if sd.Hash != d.Hash || sd.Keys != d.Keys {
				return fmt.Errorf("verify: internal error: the same entries hash to %s in the store and %s in the backup", sd.Hash, d.Hash)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "same map as %s: %d keys, hash %s", o.against, d.Keys, d.Hash)
			if sd.Revision == d.Revision {
				fmt.Fprintf(w, ", revision %d\n", d.Revision)
			} else {
				fmt.Fprintf(w, "; the store is at revision %d, the backup at %d\n", sd.Revision, d.Revision)
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.against, "against", "", "the backup to compare with (required)")
	return c
}
