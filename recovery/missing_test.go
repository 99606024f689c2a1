package recovery_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/wal"
)

// TestSnapshotMissing: a directory whose snapshot was removed after a
// checkpoint deleted the segments it covered starts its log after
// log.000001. Recover and Check name the missing snapshot and the
// revisions nothing covers, not a missing log.000001, and change
// nothing; PlanRepair still plans the way out.
func TestSnapshotMissing(t *testing.T) {
	tests := []struct {
		name  string
		first wal.SegmentNum
		rev   record.Revision
		ops   bool
		want  string
	}{
		{name: "log starts at revision 3001", first: 7, rev: 3001, ops: true,
			want: "snapshot missing: log.000007 starts at revision 3001 and nothing covers revisions 1–3000"},
		{name: "first segment holds no record", first: 3, ops: false,
			want: "snapshot missing: the log starts at log.000003, which holds no record, and nothing covers the segments before it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			putFile(t, fsys, dir+"/"+recovery.MarkerName, []byte(recovery.MarkerContent()))
			ops := articleOps()
			if !tc.ops {
				ops = nil
			}
			writeLog(t, fsys, dir, tc.first, tc.rev, ops)
			before := files(t, fsys, dir)
			_, err := recovery.Recover(fsys, dir, recovery.Options{})
			var ce *wal.CorruptError
			if !errors.As(err, &ce) || !recovery.IsCorrupt(err) || ce.File != dir+"/snapshot" || ce.Reason != tc.want {
				t.Errorf("Recover: %v; want corruption at %s/snapshot: %s", err, dir, tc.want)
			}
			rep, err := recovery.Check(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range rep.Problems {
				got = append(got, p.File+": "+p.Reason)
			}
			if d := cmp.Diff([]string{dir + "/snapshot: wal: corrupt log: " + tc.want}, got); d != "" {
				t.Errorf("Check's problems (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, files(t, fsys, dir)); d != "" {
				t.Errorf("files changed (-before +after):\n%s", d)
			}
			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatalf("PlanRepair: %v", err)
			}
			if !strings.Contains(strings.Join(plan.Steps, "\n"), "create "+wal.SegmentPath(dir, 1)) {
				t.Errorf("the plan does not start the log again at log.000001: %q", plan.Steps)
			}
		})
	}
}
