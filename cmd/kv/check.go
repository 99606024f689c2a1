package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

func newCheckCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "check DIR|FILE",
		Short: "Verify every segment and the snapshot without changing anything",
		Long: `check reads the snapshot and every log segment, verifies every checksum,
the segment numbering and the revisions, and prints each problem with its
file and offset, then a summary. It takes no lock and writes nothing, so
it is safe on a directory another process has open.

Exit status: 0 when recovery would succeed (a torn tail, which a crash
leaves and recovery cuts, is reported but is not a failure), 1 when
something is corrupt. On a terminal, a progress line on stderr shows the
bytes read, of how many, and the rate.

Given a backup FILE (written by "kv DIR backup", or a snapshot copied out
of a data directory) in place of DIR, it verifies every byte of it (each
frame's checksum and the file's, or each page of an image) and prints
its revision, keys, leases and content hash; exit status 1 names the
offset of the damage.`,
		Example: `  kv data check
  kv data check --json | jq .ok
  kv /backups/data.kvbackup check     # verify a backup, offline`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			stop := onInterrupt(cmd.ErrOrStderr(), func() string { return "check stopped; it changes nothing" })
			defer stop()
			if isFile(a[0]) {
				return checkBackup(cmd.OutOrStdout(), a[0], asJSON)
			}
			rep, err := checkDir(cmd.ErrOrStderr(), a[0], "check")
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(checkJSON(rep)); err != nil {
					return err
				}
				if !rep.Clean() {
					return exitError{code: exitFailed}
				}
				return nil
			}
			return printCheck(cmd.OutOrStdout(), rep)
		},
		ValidArgsFunction: completeDir,
	}
	jsonFlag(c, &asJSON, "print the report as a JSON object")
	return c
}

func printCheck(w io.Writer, rep *recovery.Report) error {
	for _, p := range rep.Problems {
		kind := "corrupt"
		switch {
		case p.Format:
			kind = "format"
		case !p.Corrupt:
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
	advice := "see 'kv DIR repair'"
	if rep.FormatErr() != nil {
		snap = "snapshot of a format version this build does not read"
		advice = "if a later build wrote it, open the directory with that build; if its version is damaged, see 'kv DIR repair', which sets it aside"
	}
	if rep.LogFormatErr() != nil {
		advice = "a build that reads the log's format wrote it, as its header's checksums hold: open the directory with that build; repair refuses it"
	}
	if !rep.Clean() {
		n, formats := 0, 0
		for _, p := range rep.Problems {
			switch {
			case p.Format:
				formats++
			case p.Corrupt:
				n++
			}
		}
		head := "corrupt: " + kvcli.Plural(int64(n), "problem")
		if formats > 0 {
			head = fmt.Sprintf("%s and %s of a format version this build does not read", head, kvcli.Plural(int64(formats), "log segment"))
			if n == 0 {
				head = fmt.Sprintf("unreadable: %s of a format version this build does not read", kvcli.Plural(int64(formats), "log segment"))
			}
		}
		fmt.Fprintf(w, "%s; %s, %s to replay; recovery will refuse this directory (%s)\n", head, snap, kvcli.Plural(int64(live), "segment"), advice)
		return exitError{code: exitFailed}
	}
	fmt.Fprintf(w, "ok: %s, %s to replay, %s at revision %d\n", snap, kvcli.Plural(int64(live), "segment"), kvcli.Plural(int64(rep.Keys), "key"), rep.Revision)
	return nil
}

// checkJSON is check's report as JSON.
func checkJSON(rep *recovery.Report) any {
	type problem struct {
		File    string `json:"file"`
		Offset  int64  `json:"offset"` // -1: the whole file
		Reason  string `json:"reason"`
		Corrupt bool   `json:"corrupt"`
		Format  bool   `json:"format,omitempty"` // a log segment of a format version this build does not read: not damage
	}
	out := struct {
		OK       bool      `json:"ok"`
		Problems []problem `json:"problems"`
		Stat     any       `json:"stat"`
	}{OK: rep.Clean(), Problems: []problem{}, Stat: statJSON(rep)}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, problem{p.File, p.Offset, p.Reason, p.Corrupt, p.Format})
	}
	return out
}

// checkDir runs recovery.Check on an existing data directory, with a
// progress line labelled label on stderr when it is a terminal.
func checkDir(stderr io.Writer, dir, label string) (*recovery.Report, error) {
	if err := requireDir(dir); err != nil {
		return nil, err
	}
	fsys, p := readProgress(stderr, vfs.OS, dir, label)
	defer p.done()
	return recovery.Check(fsys, dir)
}

// checkBackup verifies every byte of the backup in file, and says so.
func checkBackup(w io.Writer, file string, asJSON bool) error {
	st, err := statBackup(file)
	if asJSON {
		out := struct {
			OK       bool     `json:"ok"`
			Problems []string `json:"problems"`
			Stat     any      `json:"stat,omitempty"`
		}{OK: err == nil, Problems: []string{}}
		if err != nil {
			out.Problems = append(out.Problems, describe(err))
		} else {
			out.Stat = backupStatJSON(st)
		}
		if jerr := json.NewEncoder(w).Encode(out); jerr != nil {
			return jerr
		}
		if err != nil {
			return exitError{code: exitFailed}
		}
		return nil
	}
	if err != nil {
		fmt.Fprintf(w, "corrupt: %s\n", describe(err))
		return exitError{code: exitFailed}
	}
	d := st.Digest
	fmt.Fprintf(w, "ok: backup %s, every byte verified: revision %d, %s, %s, hash %s\n", file, d.Revision, kvcli.Plural(int64(d.Keys), "key"), kvcli.Plural(int64(d.Leases), "lease"), d.Hash)
	return nil
}
