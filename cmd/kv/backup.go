package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

func newBackupCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "backup DIR FILE|-",
		Short: "Write a backup of the store at one revision, while a writer goes on",
		Long: `backup writes every key of the store, as of one revision, to FILE: the
snapshot's format, checksummed end to end (FORMAT.md, "Backup"). It
opens the directory as the read commands do, without the writer's lock:
beside a live writer in another process it backs up what that writer has
marked durable, and the writer never waits for it.

FILE is written as FILE.tmp, fdatasync'ed, renamed to FILE, and FILE's
directory fsync'ed: after a crash FILE is the complete new backup or what
it was before, never a part. With "-" the backup goes to standard output,
and the line that describes it to standard error.

It prints the backup's revision, number of keys, content hash (the one
"kv DIR stat" prints) and size. "kv restore FILE DIR" makes a new data
directory of it; "kv DIR verify --against FILE" compares a store with it.`,
		Example: `  kv data backup /backups/data.kvbackup
  kv data backup - | ssh host 'cat > data.kvbackup'
  kv data backup /backups/data.kvbackup --json | jq -r .hash`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := g.openRead(a[0], false)
			if err != nil {
				return err
			}
			defer s.Close()
			file := a[1]
			var rev kv.Revision
			cw := &countWriter{}
			if file == "-" {
				cw.w = cmd.OutOrStdout()
				if rev, err = s.Backup(cw); err != nil {
					return err
				}
			} else {
				opts, err := g.storeOptions(true)
				if err != nil {
					return err
				}
				fsys := opts.FS
				if fsys == nil {
					fsys = vfs.OS
				}
				err = vfs.Publish(fsys, filepath.Dir(file), filepath.Base(file), func(w io.Writer) error {
					cw.w = w
					rev, err = s.Backup(cw)
					return err
				})
				if err != nil {
					return err
				}
			}
			// The digest of the backup is the view's: Backup and Hash would
			// take two views, so it is read back from what was written
			// when it is a file, and taken from the store otherwise.
			d, err := backupDigest(s, file, rev)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if file == "-" {
				out = cmd.ErrOrStderr()
			}
			if asJSON {
				return json.NewEncoder(out).Encode(digestJSON{d.Revision, d.Keys, d.Leases, d.Hash.String(), &cw.n})
			}
			fmt.Fprintf(out, "backup at revision %d: %s, %s, hash %s, %d bytes\n", d.Revision, kvcli.Plural(int64(d.Keys), "key"), kvcli.Plural(int64(d.Leases), "lease"), d.Hash, cw.n)
			return nil
		},
		ValidArgsFunction: completeDir,
	}
	jsonFlag(c, &asJSON, "print the backup's description as a JSON object (on stderr with FILE -)")
	return c
}

// digestJSON describes a backup, a restored store or a verified one in
// --json.
type digestJSON struct {
	Revision kv.Revision `json:"revision"`
	Keys     int64       `json:"keys"`
	Leases   int64       `json:"leases"`
	Hash     string      `json:"hash"`
	Bytes    *int64      `json:"bytes,omitempty"` // backup: its size
}

// backupDigest returns the digest of the backup just written at rev: read
// back from file, which verifies it too, or, for standard output, the
// store's, which a read-only store keeps at rev.
func backupDigest(s *kv.Store, file string, rev kv.Revision) (kv.Digest, error) {
	if file != "-" {
		d, err := kv.ReadBackup(file, nil, nil)
		return d, backupError(err)
	}
	d, err := s.Hash()
	if err == nil && d.Revision != rev {
		err = fmt.Errorf("the store moved from revision %d to %d during the backup", rev, d.Revision)
	}
	return d, err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// backupError words a damaged backup as one line naming the file and
// offset, without the hint that describe gives damage in a data
// directory: a backup is not repaired.
func backupError(err error) error {
	var ce *kv.CorruptError
	if err == nil || !errors.As(err, &ce) || (!errors.Is(err, kv.ErrBackupCorrupt) && !errors.Is(err, kv.ErrBackupVersion)) {
		return err
	}
	return fmt.Errorf("%s offset %d: %s: %s", ce.File, ce.Offset, trimPrefix(ce.Err), ce.Reason)
}
