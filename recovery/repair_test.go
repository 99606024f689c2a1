package recovery_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestCheckAndRepair damages a directory, checks that Check reports it and
// Recover refuses it, repairs it, and checks that Recover then gives the
// map of the records before the damage, with the evidence kept.
func TestCheckAndRepair(t *testing.T) {
	ops := articleOps()
	tests := []struct {
		name   string
		damage func(t *testing.T, fsys *vfs.MemFS, dir string)
		want   map[string]string
		broken []string
	}{
		{
			name: "flipped byte in record 12",
			damage: func(t *testing.T, fsys *vfs.MemFS, dir string) {
				sp := recordSpans(t, fsys, dir, 1)
				name := wal.SegmentPath(dir, 1)
				b, _ := vfs.ReadFile(fsys, name)
				b[sp[11][0]+30] ^= 0xff
				rewrite(t, fsys, name, b)
			},
			want:   mapAfter(t, ops, 11),
			broken: []string{"log.000001.broken"},
		},
		{
			name: "gap after segment 1",
			damage: func(t *testing.T, fsys *vfs.MemFS, dir string) {
				writeLog(t, fsys, dir, 3, 18, ops[:2])
			},
			want:   mapAfter(t, ops, 17),
			broken: []string{"log.000003.broken"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeLog(t, fsys, dir, 1, 1, ops)
			tc.damage(t, fsys, dir)
			rep, err := recovery.Check(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Clean() {
				t.Fatal("Check found a damaged directory clean")
			}
			if _, err := recovery.Recover(fsys, dir, recovery.Options{}); !recovery.IsCorrupt(err) {
				t.Fatalf("Recover before repair: %v", err)
			}
			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Empty() || len(plan.Drops) == 0 {
				t.Fatalf("plan %+v: want steps that drop something", plan)
			}
			if err := plan.Apply(fsys, func(s string) { t.Log(s) }); err != nil {
				t.Fatal(err)
			}
			res, err := recovery.Recover(fsys.CrashClone(), dir, recovery.Options{})
			if err != nil {
				t.Fatalf("Recover after repair: %v", err)
			}
			res.Writer.Close()
			if d := cmp.Diff(tc.want, dump(res.Map)); d != "" {
				t.Errorf("map after repair (-want +got):\n%s", d)
			}
			names := mustList(t, fsys, dir)
			for _, b := range tc.broken {
				if !strings.Contains(strings.Join(names, " "), b) {
					t.Errorf("evidence %s missing: %v", b, names)
				}
			}
		})
	}
}

func TestRepairSnapshot(t *testing.T) {
	ops := articleOps()
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, ops)
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	writeLog2 := func() {
		// Two more records in log.000002 after the snapshot.
		fsys.Remove(wal.SegmentPath(dir, 2))
		writeLog(t, fsys, dir, 2, 18, ops[:2])
	}
	writeLog2()
	name := dir + "/" + snapshot.Name
	b, _ := vfs.ReadFile(fsys, name)
	b[len(b)-5] ^= 1
	rewrite(t, fsys, name, b)
	plan, err := recovery.PlanRepair(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(fsys, nil); err != nil {
		t.Fatal(err)
	}
	res, err = recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatalf("Recover after repair: %v (plan %v)", err, plan.Steps)
	}
	defer res.Writer.Close()
	if d := cmp.Diff(map[string]string{"c": "3"}, dump(res.Map)); d != "" {
		t.Errorf("map (-want +got):\n%s", d)
	}
	if res.Map.Revision() != 19 {
		t.Errorf("revision %d after repair, want 19: revisions must not go backwards", res.Map.Revision())
	}
}

func TestCheckClean(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	rep, err := recovery.Check(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Keys != 6 || rep.Revision != 17 {
		t.Errorf("clean dir: clean=%v keys=%d rev=%d problems=%v", rep.Clean(), rep.Keys, rep.Revision, rep.Problems)
	}
	plan, _ := recovery.PlanRepair(fsys, dir)
	if !plan.Empty() {
		t.Errorf("repair plan for a clean dir: %v", plan.Steps)
	}
}
