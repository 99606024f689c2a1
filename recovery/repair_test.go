package recovery_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/forge"
	"github.com/kvstore/kv/record"
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

// TestRepairSnapshot: a damaged snapshot is set aside when its first
// record is damaged, and written again with the entries that read when
// only its entries (here its end frame) are; the two records after it
// apply on top either way, and the repair's skip passes every revision.
func TestRepairSnapshot(t *testing.T) {
	ops := articleOps()
	keptAll := map[string]string{}
	for k, v := range articleWant {
		keptAll[k] = v
	}
	keptAll["c"] = "58" // 55, then the two adds of log.000002
	for _, tc := range []struct {
		name string
		at   func(b []byte) int
		want map[string]string
	}{
		{"the end frame damaged: every entry kept", func(b []byte) int { return len(b) - 5 }, keptAll},
		{"the first record damaged: set aside", func([]byte) int { return 8 + 12 }, map[string]string{"c": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeLog(t, fsys, dir, 1, 1, ops)
			res, err := recovery.Recover(fsys, dir, recovery.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res.Writer.Close()
			// The cases are about a snapshot in frames (an image's are
			// in TestImageDamage).
			toFrames(t, fsys, dir)
			// Two more records in log.000002 after the snapshot.
			fsys.Remove(wal.SegmentPath(dir, 2))
			writeLog(t, fsys, dir, 2, 18, ops[:2])
			name := dir + "/" + snapshot.Name
			b, _ := vfs.ReadFile(fsys, name)
			b[tc.at(b)] ^= 1
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
			if d := cmp.Diff(tc.want, dump(res.Map)); d != "" {
				t.Errorf("map (-want +got):\n%s", d)
			}
			// Revision 19 was the log's last: the repair skips past it, so
			// that revisions never go backwards or repeat.
			if res.Map.Revision() != plan.Skip || plan.Skip <= 19 {
				t.Errorf("revision %d after repair (skip %d), want the skip, past 19: revisions must not go backwards", res.Map.Revision(), plan.Skip)
			}
		})
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

// writeTwoSegments writes the article's operations in two segments: the
// first ten in log.000001, sealed, the rest in log.000002.
func writeTwoSegments(tb testing.TB, fsys vfs.FS, dir string) {
	tb.Helper()
	// The article has 17 operations: ten, then seven.
	writeSegments(tb, fsys, dir, 10)
}

// evidence returns the files of dir whose name has the BrokenSuffix, with
// their bytes. A copy still under its temporary name (NAME.broken.tmp) is
// not evidence: the original is cut only once its copy is published.
func evidence(tb testing.TB, fsys vfs.FS, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for n, b := range files(tb, fsys, dir) {
		if strings.Contains(n, recovery.BrokenSuffix) && !strings.HasSuffix(n, ".tmp") {
			out[n] = b
		}
	}
	return out
}

// TestRepairCrashKeepsEvidence crashes a repair after each of its file
// operations in turn, and reruns the repair (PlanRepair and Apply) on what
// a process crash and a power loss leave. The rerun must overwrite no
// .broken file, some .broken file must hold each original exactly, and
// the directory must then recover. The state after the cut of log.000001
// and before log.000002 is moved aside is the one that used to lose the
// original: the rerun copied the cut file over log.000001.broken.
func TestRepairCrashKeepsEvidence(t *testing.T) {
	orig, dir := newDir(t)
	writeTwoSegments(t, orig, dir)
	seg1 := wal.SegmentPath(dir, 1)
	sp := recordSpans(t, orig, dir, 1)
	b, _ := vfs.ReadFile(orig, seg1)
	b[sp[5][0]+30] ^= 0xff // record 6 of the sealed segment
	rewrite(t, orig, seg1, b)
	originals := files(t, orig, dir)
	// What a power loss keeps of them: the mark the writer's Close left
	// at the end of log.000002 was never synced.
	durable := files(t, orig.CrashClone(), dir)
	want := mapAfter(t, articleOps(), 5)

	cutStates := 0
	for budget := 0; ; budget++ {
		base := orig.Clone()
		plan, err := recovery.PlanRepair(base, dir)
		if err != nil {
			t.Fatal(err)
		}
		err = plan.Apply(&crashFS{FS: base, budget: budget}, nil)
		if err != nil && !errors.Is(err, errCrashed) {
			t.Fatalf("crash after op %d: repair: %v", budget, err)
		}
		for _, st := range []struct {
			name string
			fs   *vfs.MemFS
		}{{"process", base.Clone()}, {"power", base.CrashClone()}} {
			state := fmt.Sprintf("%s crash after op %d", st.name, budget)
			cur := files(t, st.fs, dir)
			if c, ok := cur["log.000001"]; ok && len(c) < len(originals["log.000001"]) && cur["log.000002"] != "" {
				cutStates++
			}
			before := evidence(t, st.fs, dir)
			plan, err := recovery.PlanRepair(st.fs, dir)
			if err != nil {
				t.Fatalf("%s: plan of the rerun: %v", state, err)
			}
			if err := plan.Apply(st.fs, nil); err != nil {
				t.Fatalf("%s: rerun: %v (plan %q)", state, err, plan.Steps)
			}
			after := evidence(t, st.fs, dir)
			for n, old := range before {
				if after[n] != old {
					t.Errorf("%s: the rerun (plan %q) overwrote %s: %d bytes, were %d", state, plan.Steps, n, len(after[n]), len(old))
				}
			}
			for _, o := range []string{"log.000001", "log.000002"} {
				found := false
				for _, e := range after {
					found = found || e == originals[o] || st.name == "power" && e == durable[o]
				}
				if !found {
					t.Errorf("%s: no .broken file holds the original %s: %v", state, o, slices.Sorted(maps.Keys(after)))
				}
			}
			res, err := recovery.Recover(st.fs, dir, recovery.Options{})
			if err != nil {
				t.Fatalf("%s: Recover after the rerun: %v", state, err)
			}
			res.Writer.Close()
			if d := cmp.Diff(want, dump(res.Map)); d != "" {
				t.Errorf("%s: map after the rerun (-want +got):\n%s", state, d)
			}
			// The log held revisions 1 to 17: a crash in the repair must
			// not lose its skip past them.
			if res.Map.Revision() <= 17 {
				t.Errorf("%s: revision %d after the rerun: revisions the log held will be given again", state, res.Map.Revision())
			}
		}
		if err == nil {
			break
		}
	}
	if cutStates == 0 {
		t.Error("no crash state had log.000001 cut and log.000002 still in place")
	}
}

// TestRepairKeepsOlderEvidence repairs a damaged snapshot and a damaged
// log in directories that already hold .broken files from an earlier
// repair: they must be kept byte for byte, and the new evidence go to the
// next free number, named so in the plan.
func TestRepairKeepsOlderEvidence(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, fsys *vfs.MemFS, dir string)
		old    []string // evidence already there
		// want maps the name the new evidence must have to the file whose
		// bytes it must hold, as they were before the repair.
		want map[string]string
	}{
		{
			name: "snapshot",
			damage: func(t *testing.T, fsys *vfs.MemFS, dir string) {
				writeLog(t, fsys, dir, 1, 1, articleOps())
				res, err := recovery.Recover(fsys, dir, recovery.Options{})
				if err != nil {
					t.Fatal(err)
				}
				res.Writer.Close()
				name := dir + "/" + snapshot.Name
				b, _ := vfs.ReadFile(fsys, name)
				b[len(b)-5] ^= 1
				rewrite(t, fsys, name, b)
			},
			old:  []string{"snapshot.broken"},
			want: map[string]string{"snapshot.broken.1": "snapshot"},
		},
		{
			name: "snapshot, two older",
			damage: func(t *testing.T, fsys *vfs.MemFS, dir string) {
				writeLog(t, fsys, dir, 1, 1, articleOps())
				res, err := recovery.Recover(fsys, dir, recovery.Options{})
				if err != nil {
					t.Fatal(err)
				}
				res.Writer.Close()
				name := dir + "/" + snapshot.Name
				b, _ := vfs.ReadFile(fsys, name)
				b[len(b)-5] ^= 1
				rewrite(t, fsys, name, b)
			},
			old:  []string{"snapshot.broken", "snapshot.broken.1"},
			want: map[string]string{"snapshot.broken.2": "snapshot"},
		},
		{
			name: "log cut and later segment moved",
			damage: func(t *testing.T, fsys *vfs.MemFS, dir string) {
				writeTwoSegments(t, fsys, dir)
				seg1 := wal.SegmentPath(dir, 1)
				sp := recordSpans(t, fsys, dir, 1)
				b, _ := vfs.ReadFile(fsys, seg1)
				b[sp[5][0]+30] ^= 0xff
				rewrite(t, fsys, seg1, b)
			},
			old:  []string{"log.000001.broken", "log.000002.broken"},
			want: map[string]string{"log.000001.broken.1": "log.000001", "log.000002.broken.1": "log.000002"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			tc.damage(t, fsys, dir)
			for _, n := range tc.old {
				rewrite(t, fsys, dir+"/"+n, []byte("evidence of an earlier repair: "+n))
			}
			before := files(t, fsys, dir)
			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			for n := range tc.want {
				if !strings.Contains(strings.Join(plan.Steps, "\n"), dir+"/"+n) {
					t.Errorf("no step of the plan names %s:\n%s", n, strings.Join(plan.Steps, "\n"))
				}
			}
			if err := plan.Apply(fsys, nil); err != nil {
				t.Fatal(err)
			}
			after := files(t, fsys, dir)
			for _, n := range tc.old {
				if after[n] != before[n] {
					t.Errorf("%s was replaced: now %d bytes, %q...", n, len(after[n]), after[n][:min(len(after[n]), 16)])
				}
			}
			for n, from := range tc.want {
				if after[n] != before[from] {
					t.Errorf("%s: %d bytes, want the %d bytes of %s before the repair", n, len(after[n]), len(before[from]), from)
				}
			}
			res, err := recovery.Recover(fsys, dir, recovery.Options{})
			if err != nil {
				t.Fatalf("Recover after repair: %v (plan %q)", err, plan.Steps)
			}
			res.Writer.Close()
		})
	}
}

// TestRepairApplyRefusesTakenName takes a name the plan picked before the
// plan is applied (which the store's lock prevents in use): Apply must
// fail with fs.ErrExist and leave that file as it was.
func TestRepairApplyRefusesTakenName(t *testing.T) {
	tests := []struct {
		name  string
		taken string
	}{
		{name: "copy of the cut segment", taken: "log.000001.broken"},
		{name: "move of a later segment", taken: "log.000002.broken"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeTwoSegments(t, fsys, dir)
			seg1 := wal.SegmentPath(dir, 1)
			sp := recordSpans(t, fsys, dir, 1)
			b, _ := vfs.ReadFile(fsys, seg1)
			b[sp[5][0]+30] ^= 0xff
			rewrite(t, fsys, seg1, b)
			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			rewrite(t, fsys, dir+"/"+tc.taken, []byte("came after the plan"))
			if err := plan.Apply(fsys, nil); !errors.Is(err, fs.ErrExist) {
				t.Errorf("Apply: %v, want an error matching fs.ErrExist", err)
			}
			if got, _ := vfs.ReadFile(fsys, dir+"/"+tc.taken); string(got) != "came after the plan" {
				t.Errorf("%s replaced: %d bytes", tc.taken, len(got))
			}
		})
	}
}

// TestCheckNamesLaterFormat gives a directory a snapshot whose header
// names a format version this build does not read, as a later build's
// would: Check reports it as a problem whose error FormatErr returns,
// matching snapshot.ErrVersion, so that kv check can say so rather than
// call it damage.
func TestCheckNamesLaterFormat(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	rep, err := recovery.Check(fsys, dir)
	if err != nil || rep.FormatErr() != nil {
		t.Fatalf("Check of a sound directory: %v, FormatErr %v", err, rep.FormatErr())
	}
	name := dir + "/" + snapshot.Name
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	b[6]++ // a version past this build's
	rewrite(t, fsys, name, b)
	rep, err = recovery.Check(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() || !errors.Is(rep.FormatErr(), snapshot.ErrVersion) {
		t.Errorf("Check: clean %v, FormatErr %v; want a problem and ErrVersion", rep.Clean(), rep.FormatErr())
	}
}

// segmentOfVersion rewrites the header of segment file name to name
// format version v, with checksums that hold: what a build of that
// version would write, not damage.
func segmentOfVersion(tb testing.TB, fsys vfs.FS, name string, v uint16) {
	tb.Helper()
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		tb.Fatal(err)
	}
	forge.SegmentVersion(b, v)
	rewrite(tb, fsys, name, b)
}

// TestRepairRefusesLaterLog: a segment whose header names a format
// version this build does not read, its checksums holding, is no damage:
// recovery refuses it with wal.ErrVersion, Check says so
// (LogFormatErr), and PlanRepair plans nothing and changes nothing, where
// it would cut the log before records a later build can read. The same
// version bytes with checksums that fail are damage, which it repairs.
func TestRepairRefusesLaterLog(t *testing.T) {
	for _, v := range []uint16{wal.Version + 1, 1, 0xffff} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			fsys, dir := markedStore(t)
			name := wal.SegmentPath(dir, 1)
			segmentOfVersion(t, fsys, name, v)
			before := files(t, fsys, dir)
			_, err := recovery.Recover(fsys, dir, recovery.Options{})
			if !errors.Is(err, wal.ErrVersion) || recovery.IsCorrupt(err) {
				t.Fatalf("Recover: %v, want wal.ErrVersion, not corruption", err)
			}
			rep, err := recovery.Check(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Clean() || !errors.Is(rep.LogFormatErr(), wal.ErrVersion) || rep.FormatErr() != nil {
				t.Errorf("Check: clean %v, LogFormatErr %v, FormatErr %v; want a problem, ErrVersion and nil", rep.Clean(), rep.LogFormatErr(), rep.FormatErr())
			}
			p, err := recovery.PlanRepair(fsys, dir)
			if !errors.Is(err, wal.ErrVersion) || p != nil {
				t.Fatalf("PlanRepair: %v, %v; want no plan and wal.ErrVersion", p, err)
			}
			if msg := err.Error(); !strings.Contains(msg, name) || !strings.Contains(msg, "open the directory with that build") {
				t.Errorf("PlanRepair's error does not name the segment and the way out: %v", err)
			}
			if diff := cmp.Diff(before, files(t, fsys, dir)); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}

			// The version bytes alone, under checksums that fail: damage.
			b, err := vfs.ReadFile(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			b[16] ^= 1
			rewrite(t, fsys, name, b)
			rep, err = recovery.Check(fsys, dir)
			if err != nil || rep.LogFormatErr() != nil {
				t.Fatalf("Check of a damaged header: %v, LogFormatErr %v", err, rep.LogFormatErr())
			}
			if p, err := recovery.PlanRepair(fsys, dir); err != nil || p.Empty() {
				t.Errorf("PlanRepair of a damaged header: %v, empty %v; want a plan", err, p.Empty())
			}
		})
	}
}

// writeSegments writes the article's operations, per records to a
// segment, each segment but the last sealed.
func writeSegments(tb testing.TB, fsys vfs.FS, dir string, per int) {
	tb.Helper()
	w, err := wal.Create(fsys, dir, 1, wal.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	for i, op := range articleOps() {
		if i > 0 && i%per == 0 {
			if _, err := w.Rotate(); err != nil {
				tb.Fatal(err)
			}
		}
		p := record.Append(nil, &record.Record{Revision: record.Revision(i + 1), Ops: []record.Op{op}})
		if _, err := w.Append(p); err != nil {
			tb.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// TestRepairSummary: a plan's Summary sums up what it drops in a line
// or two (counts, revision ranges, files and what each becomes, key
// ranges), however many records that is; Dropped still lists each.
func TestRepairSummary(t *testing.T) {
	flipRecord := func(seg wal.SegmentNum, i int) func(t *testing.T, fsys *vfs.MemFS, dir string) int64 {
		return func(t *testing.T, fsys *vfs.MemFS, dir string) int64 {
			sp := recordSpans(t, fsys, dir, seg)
			name := wal.SegmentPath(dir, seg)
			b, _ := vfs.ReadFile(fsys, name)
			b[sp[i][0]+30] ^= 0xff
			rewrite(t, fsys, name, b)
			return sp[i][0]
		}
	}
	for _, tc := range []struct {
		name    string
		per     int // records per segment
		damage  func(t *testing.T, fsys *vfs.MemFS, dir string) int64
		want    []string // %d: the offset damage returns
		dropped int
	}{
		{
			name: "flipped byte in record 12 of the only segment", per: 100,
			damage:  flipRecord(1, 11),
			want:    []string{"drops 5 records, revisions 13–17: log.000001 from offset %d to the end (copied to log.000001.broken first)"},
			dropped: 5,
		},
		{
			name: "flipped byte in a middle segment", per: 5,
			damage:  flipRecord(2, 1), // revision 7
			want:    []string{"drops 10 records, revisions 8–17: log.000002 from offset %d to the end (copied to log.000002.broken first), log.000003–log.000004 (set aside as NAME.broken)"},
			dropped: 10,
		},
		{
			name: "older evidence: numbered names, each named", per: 5,
			damage: func(t *testing.T, fsys *vfs.MemFS, dir string) int64 {
				rewrite(t, fsys, wal.SegmentPath(dir, 3)+recovery.BrokenSuffix, []byte("old"))
				return flipRecord(2, 4)(t, fsys, dir) // revision 10
			},
			want:    []string{"drops 7 records, revisions 11–17: log.000002 from offset %d to the end (copied to log.000002.broken first), log.000003 (set aside as log.000003.broken.1), log.000004 (set aside as log.000004.broken)"},
			dropped: 7,
		},
		{
			name: "the last record damaged: nothing readable dropped", per: 100,
			damage:  flipRecord(1, 16),
			want:    []string{"drops no readable record: log.000001 from offset %d to the end (copied to log.000001.broken first)"},
			dropped: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeSegments(t, fsys, dir, tc.per)
			off := tc.damage(t, fsys, dir)
			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, w := range tc.want {
				if strings.Contains(w, "%d") {
					w = fmt.Sprintf(w, off)
				}
				want = append(want, w)
			}
			if d := cmp.Diff(want, plan.Summary()); d != "" {
				t.Errorf("summary (-want +got):\n%s", d)
			}
			if len(plan.Dropped) != tc.dropped {
				t.Errorf("%d records dropped, want %d", len(plan.Dropped), tc.dropped)
			}
			if len(plan.Unreadable) == 0 {
				t.Error("no unreadable range")
			}
		})
	}
}

// TestRepairSummarySnapshot: for a damaged snapshot, the summary says
// how many keys it sets aside and from which key to which, or, rewritten
// with the entries that read, how many it keeps and which ranges it
// loses.
func TestRepairSummarySnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(b []byte) int
		want []string
	}{
		{"the end frame damaged: every entry kept", func(b []byte) int { return len(b) - 5 },
			[]string{`keeps all 6 keys of the snapshot (its first record counts 6): its damage held none`}},
		{"a middle entry damaged", func(b []byte) int { return 8 + 40 + 20 },
			[]string{`keeps the 5 keys of the snapshot that read and loses 1 (its first record counts 6): the keys before "d"`}},
		{"the first record damaged: set aside", func([]byte) int { return 8 + 12 },
			[]string{`drops the 6 keys of snapshot that read, "c" to "k5" (set aside as snapshot.broken)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeLog(t, fsys, dir, 1, 1, articleOps())
			res, err := recovery.Recover(fsys, dir, recovery.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res.Writer.Close()
			toFrames(t, fsys, dir)
			name := dir + "/" + snapshot.Name
			b, _ := vfs.ReadFile(fsys, name)
			b[tc.at(b)] ^= 1
			rewrite(t, fsys, name, b)
			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			got := plan.Summary()
			if len(got) > 0 && strings.HasPrefix(got[0], "drops no readable record") {
				got = got[1:] // the segments the snapshot covered, set aside with it
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("summary (-want +got):\n%s\nsteps %q", d, plan.Steps)
			}
		})
	}
}
