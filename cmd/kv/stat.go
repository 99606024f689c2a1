package main

import (
	"encoding/json"
	"fmt"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"path/filepath"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/recovery"
	"github.com/spf13/cobra"
)

type statOpts struct{ json bool }

func newStatCmd(g *globalOpts) *cobra.Command {
	o := &statOpts{}
	c := &cobra.Command{
		Use:   "stat DIR|FILE",
		Short: "Describe the segments, the snapshot and the map",
		Long: `stat lists the log segments with their sizes and record counts, the
snapshot with the segment it covers and its revision, and the map
recovery would build: its number of keys and their bytes, its revision
and its content hash, which two copies of a store share exactly when
they hold the same map.

The content hash (FORMAT.md, "Content hash") is the SHA-256 of every key,
in key order, with its value, its create and mod revisions and its
version: not the map's revision (printed beside it), nor the leases. A
copy made by "kv A dump | kv B load" holds the same keys and values but
new revisions (load writes them as new puts, from revision 1), so its
hash differs; a copy made by "kv A backup F; kv restore F B" keeps them,
and its hash is the same. "kv B verify --against F" says which key
differs and how.

Like check, it takes no lock and writes nothing.

Given a backup FILE (written by "kv DIR backup", or a snapshot copied out
of a data directory) in place of DIR, it verifies every byte of it and
prints its size, format version and the segment it covers, then its map
as for a directory: keys, their bytes, revision and content hash, the
same hash as the directory's it was taken from at that revision.`,
		Example: `  kv data stat
  kv data stat --json
  kv /backups/data.kvbackup stat     # an offline look at a backup`,
		Args:              args(1, 1),
		ValidArgsFunction: completeDir,
		RunE: func(cmd *cobra.Command, a []string) error {
			if isFile(a[0]) {
				st, err := statBackup(a[0])
				if err != nil {
					return err
				}
				if o.json {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(backupStatJSON(st))
				}
				printBackupStat(cmd.OutOrStdout(), st)
				return nil
			}
			rep, err := checkDir(cmd.ErrOrStderr(), a[0], "stat")
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if o.json {
				return json.NewEncoder(w).Encode(statJSON(rep))
			}
			if rep.HasSnapshot && rep.SnapshotErr == nil {
				fmt.Fprintf(w, "snapshot  covers log.%s  revision %d  %d keys\n", rep.Snapshot.Covered, rep.Snapshot.Revision, rep.Snapshot.Count)
			} else if rep.SnapshotErr != nil {
				fmt.Fprintf(w, "snapshot  damaged: %s\n", describe(rep.SnapshotErr))
			} else {
				fmt.Fprintf(w, "snapshot  none\n")
			}
			writer := liveWriter(a[0])
			for i, s := range rep.Segments {
				state := "open"
				switch {
				case s.Covered:
					state = "covered by the snapshot (not replayed; kept for watchers in other processes)"
				case s.Err != nil:
					state = "corrupt: " + describe(s.Err)
				case s.Torn && writer != 0 && i == len(rep.Segments)-1:
					// Beside a live writer, what follows the last whole
					// record of the newest segment is its write in flight.
					state = fmt.Sprintf("being written by process %d (whole records up to %d)", writer, s.End)
				case s.Torn:
					state = fmt.Sprintf("torn tail at %d", s.End)
				case s.Sealed:
					state = "sealed"
				}
				revs := ""
				if s.Records > 0 {
					revs = fmt.Sprintf("  revisions %d-%d", s.FirstRev, s.LastRev)
				}
				fmt.Fprintf(w, "log.%s  %d bytes  %s%s  %s\n", s.Segment, s.Size, kvcli.Plural(int64(s.Records), "record"), revs, state)
			}
			if rep.Clean() {
				fmt.Fprintf(w, "map       %s  %d bytes  revision %d  hash %s\n", kvcli.Plural(int64(rep.Keys), "key"), rep.Bytes, rep.Revision, rep.Hash)
				fmt.Fprintln(w, hashCovers)
			}
			return nil
		},
	}
	jsonFlag(c, &o.json, "print one JSON object")
	return c
}

// hashCovers is the line stat prints under the map's: what its content
// hash covers, so that two copies whose hashes differ are explained.
const hashCovers = `hash      covers keys, values, create and mod revisions, versions (not leases): a "dump | load" copy has new revisions, so another hash`

func statJSON(rep *recovery.Report) any {
	type seg struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		Records  int    `json:"records"`
		FirstRev uint64 `json:"first_revision,omitempty"`
		LastRev  uint64 `json:"last_revision,omitempty"`
		Sealed   bool   `json:"sealed"`
		Covered  bool   `json:"covered"`
		Torn     bool   `json:"torn"`
		Error    string `json:"error,omitempty"`
	}
	type snap struct {
		Covered  string `json:"covers"`
		Revision uint64 `json:"revision"`
		Keys     uint64 `json:"keys"`
		Error    string `json:"error,omitempty"`
	}
	out := struct {
		Snapshot *snap  `json:"snapshot"`
		Segments []seg  `json:"segments"`
		Keys     int    `json:"keys"`
		Bytes    int64  `json:"bytes"`
		Revision uint64 `json:"revision"`
		Hash     string `json:"hash,omitempty"`
		Clean    bool   `json:"clean"`
	}{Segments: []seg{}, Keys: rep.Keys, Bytes: rep.Bytes, Revision: uint64(rep.Revision), Clean: rep.Clean()}
	if rep.Clean() {
		out.Hash = rep.Hash.String()
	}
	if rep.HasSnapshot {
		out.Snapshot = &snap{Covered: "log." + rep.Snapshot.Covered.String(), Revision: uint64(rep.Snapshot.Revision), Keys: rep.Snapshot.Count}
		if rep.SnapshotErr != nil {
			out.Snapshot = &snap{Error: describe(rep.SnapshotErr)}
		}
	}
	for _, s := range rep.Segments {
		j := seg{Name: "log." + s.Segment.String(), Size: s.Size, Records: s.Records, FirstRev: uint64(s.FirstRev),
			LastRev: uint64(s.LastRev), Sealed: s.Sealed, Covered: s.Covered, Torn: s.Torn}
		if s.Err != nil {
			j.Error = describe(s.Err)
		}
		out.Segments = append(out.Segments, j)
	}
	return out
}

// liveWriter returns the pid of the process holding dir's LOCK, as the
// kernel's table of locks names it (Linux), or 0 when no process holds it
// or the table cannot tell (elsewhere LOCK's pid line may be a dead
// writer's, and is not taken as proof of a live one).
func liveWriter(dir string) int {
	if !vfs.NamesLockHolders(vfs.OS) {
		return 0
	}
	return vfs.LockHolder(vfs.OS, filepath.Join(dir, kv.LockName))
}
