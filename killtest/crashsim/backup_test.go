package crashsim

import (
	"strings"
	"testing"
)

// backupRaces traces the backup workload of n writes and counts, in its
// trace, the backups, the checkpoints, and the overlaps: a checkpoint's
// snapshot being written (from the create of snapshot.tmp to its rename)
// while a backup's file is (from the create of backup.N.tmp to its
// rename), or the other way round.
func backupRaces(t *testing.T, n int, seed uint64) (backups, checkpoints, overlaps int) {
	t.Helper()
	ws, err := Workloads(n, seed)
	if err != nil {
		t.Fatal(err)
	}
	var w Workload
	for _, x := range ws {
		if x.Name == "backup" {
			w = x
		}
	}
	c := &checker{w: w, opts: w.Options, cache: map[uint64]outcome{}, report: &Report{}}
	events, err := c.trace(nil)
	if err != nil {
		t.Fatal(err)
	}
	inBackup, inCheckpoint := 0, false
	overlapped := false // the current checkpoint or backups overlapped
	for _, e := range events {
		s := e.String()
		switch {
		case strings.HasPrefix(s, "create "+backupPrefix) && strings.HasSuffix(s, ".tmp"):
			backups++
			inBackup++
		case strings.HasPrefix(s, "rename "+backupPrefix):
			inBackup--
		case s == "create snapshot.tmp":
			checkpoints++
			inCheckpoint = true
		case strings.HasPrefix(s, "rename snapshot.tmp"):
			inCheckpoint = false
			overlapped = false
		}
		if inBackup > 0 && inCheckpoint && !overlapped {
			overlaps++
			overlapped = true
		}
	}
	return backups, checkpoints, overlaps
}

// TestBackupWorkloadRaces: the backup workload does what its doc says:
// in its trace, a checkpoint writes its snapshot while a backup is being
// written, at the sizes the simulator's tests and crashsim all run.
//
// The trace is the program's run, whose interleaving the scheduler
// decides: a busy machine can make one run's in-backup checkpoints all
// find the log checkpointed already (nothing to write). Each size gets
// three runs, and one with a race is enough: a workload that never races
// fails all three.
func TestBackupWorkloadRaces(t *testing.T) {
	for _, n := range []int{60, 100, 150} {
		raced := false
		for try := 1; try <= 3 && !raced; try++ {
			backups, checkpoints, overlaps := backupRaces(t, n, 1)
			t.Logf("%d writes, run %d: %d backups, %d checkpoints, %d overlapping", n, try, backups, checkpoints, overlaps)
			raced = overlaps > 0
		}
		if !raced {
			t.Errorf("%d writes: no checkpoint raced a backup in 3 runs", n)
		}
	}
}
