package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// salvageStore is a store with a snapshot of k00..k19 (revisions 1 to
// 20) and a log after it: puts of k20..k59 (revisions 21 to 60) over
// small segments.
func salvageStore(t *testing.T) (*vfs.MemFS, kv.Options) {
	t.Helper()
	mem := vfs.NewMem()
	opts := kv.Options{FS: mem, SegmentSize: 1 << 10, CheckpointBytes: -1, NoPreallocate: true, LogRetention: -1}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if _, err := s.Put([]byte(fmt.Sprintf("k%02d", i)), []byte(fmt.Sprintf("value %02d", i))); err != nil {
			t.Fatal(err)
		}
		if i == 19 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, opts
}

// salvageKeys runs kv.Salvage through a recorder and returns the keys it
// read and its report; it fails the test if anything was changed.
func salvageRun(t *testing.T, mem *vfs.MemFS) ([]string, *recovery.SalvageReport) {
	t.Helper()
	before := dirFiles(t, mem, "/data")
	names, _ := mem.List("/data")
	rec := vfs.NewRecorder(mem, nil)
	rep, err := kv.Salvage("/data", &kv.Options{FS: rec})
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	if ev := rec.Events(); len(ev) != 0 {
		t.Fatalf("Salvage changed the file system: %v", ev)
	}
	if d := diffFiles(before, dirFiles(t, mem, "/data")); d != "" {
		t.Fatalf("Salvage changed files: %s", d)
	}
	if after, _ := mem.List("/data"); !slices.Equal(names, after) {
		t.Fatalf("Salvage changed the listing: %v, then %v", names, after)
	}
	var keys []string
	for e := range rep.Map.All(nil, nil) {
		keys = append(keys, string(e.Key))
	}
	return keys, rep
}

func keyRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("k%02d", i))
	}
	return out
}

// rewriteFile replaces name in mem with b.
func rewriteFile(t *testing.T, mem *vfs.MemFS, name string, b []byte) {
	t.Helper()
	mem.Remove(name)
	f, err := mem.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(b, 0)
	f.Sync()
	f.Close()
}

// TestSalvage: kv.Salvage reads every readable entry and record of a
// damaged directory, says what it could not read, and changes nothing:
// no write, sync, create, rename or unlink reaches the file system (a
// recorder sees every one), no byte of any file differs after.
func TestSalvage(t *testing.T) {
	segName := func(mem *vfs.MemFS, i int) string {
		segs, _ := wal.ListSegments(mem, "/data")
		return wal.SegmentPath("/data", segs[i])
	}
	tests := []struct {
		name     string
		damage   func(t *testing.T, mem *vfs.MemFS)
		want     []string
		whole    bool
		missing  int
		gaps     int
		lostSnap bool
	}{
		{name: "intact", damage: func(*testing.T, *vfs.MemFS) {}, want: keyRange(0, 60), whole: true},
		{name: "a record flipped in the first live segment",
			damage: func(t *testing.T, mem *vfs.MemFS) {
				name := segName(mem, 0)
				b, _ := vfs.ReadFile(mem, name)
				b[48+24+10] ^= 0x40 // the first data record's payload
				rewriteFile(t, mem, name, b)
			},
			want: slices.Delete(keyRange(0, 60), 20, 21), gaps: 1},
		{name: "the newest segment deleted",
			damage: func(t *testing.T, mem *vfs.MemFS) {
				segs, _ := wal.ListSegments(mem, "/data")
				mem.Remove(wal.SegmentPath("/data", segs[len(segs)-1]))
			},
			missing: 1},
		{name: "the snapshot's tail damaged",
			damage: func(t *testing.T, mem *vfs.MemFS) {
				name := path.Join("/data", snapshot.Name)
				b, _ := vfs.ReadFile(mem, name)
				rewriteFile(t, mem, name, b[:len(b)-60])
			},
			lostSnap: true},
		{name: "text appended to the newest segment",
			damage: func(t *testing.T, mem *vfs.MemFS) {
				segs, _ := wal.ListSegments(mem, "/data")
				name := wal.SegmentPath("/data", segs[len(segs)-1])
				b, _ := vfs.ReadFile(mem, name)
				rewriteFile(t, mem, name, append(bytes.TrimRight(b, "\x00"), "my notes\n"...))
			},
			want: keyRange(0, 60)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, _ := salvageStore(t)
			tt.damage(t, mem)
			keys, rep := salvageRun(t, mem)
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, keys); diff != "" {
					t.Errorf("keys (-want +got):\n%s", diff)
				}
			}
			if rep.Whole() != tt.whole {
				t.Errorf("Whole = %v, want %v (report %+v)", rep.Whole(), tt.whole, rep)
			}
			if len(rep.Missing) != tt.missing || len(rep.Gaps) != tt.gaps {
				t.Errorf("missing %v, gaps %v; want %d and %d", rep.Missing, rep.Gaps, tt.missing, tt.gaps)
			}
			if tt.lostSnap && (rep.Snapshot == nil || rep.Snapshot.Complete || len(rep.Snapshot.Lost) == 0) {
				t.Errorf("the snapshot's damage is not reported: %+v", rep.Snapshot)
			}
			if tt.name == "a record flipped in the first live segment" && (rep.Gaps[0] != recovery.RevRange{From: 21, To: 21}) {
				t.Errorf("gaps %v, want revision 21", rep.Gaps)
			}
		})
	}
}

// TestSalvageRefusesNonStores: salvage reads only a store.
func TestSalvageRefusesNonStores(t *testing.T) {
	mem := vfs.NewMem()
	mem.MkdirAll("/notes", 0o700)
	f, _ := mem.Create("/notes/log.000001")
	f.WriteAt([]byte("my notes"), 0)
	f.Close()
	if _, err := kv.Salvage("/notes", &kv.Options{FS: mem}); !errors.Is(err, kv.ErrNotDataDir) {
		t.Errorf("notes: %v", err)
	}
	if _, err := kv.Salvage("/missing", &kv.Options{FS: mem}); !errors.Is(err, kv.ErrNoStore) {
		t.Errorf("missing: %v", err)
	}
	if !strings.Contains(fmt.Sprint(kv.ErrNoStore), "no kv store") {
		t.Error(kv.ErrNoStore)
	}
}

// TestRepairKeepsSnapshotEntries: a snapshot whose tail is damaged is
// written again with the entries that read, so the repair loses only the
// keys after the last one that reads, and the log after the snapshot
// applies on top; the plan names the lost key range and drops no record.
func TestRepairKeepsSnapshotEntries(t *testing.T) {
	mem, opts := salvageStore(t)
	toFrames(t, mem) // a snapshot in frames (an image's are in recovery's TestImageDamage)
	name := path.Join("/data", snapshot.Name)
	b, _ := vfs.ReadFile(mem, name)
	rewriteFile(t, mem, name, b[:len(b)-60]) // the end frame and the last entries
	if _, rep := salvageRun(t, mem); rep.Snapshot == nil || rep.Snapshot.Complete {
		t.Fatalf("salvage: %+v", rep.Snapshot)
	}
	plan, err := recovery.PlanRepair(mem, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.LostKeys) != 1 || plan.LostKeys[0].Before != nil || len(plan.Dropped) != 0 || len(plan.DroppedEntries) != 0 {
		t.Fatalf("plan: lost %v, dropped %d records and %d entries; steps %q", plan.LostKeys, len(plan.Dropped), len(plan.DroppedEntries), plan.Steps)
	}
	last := string(plan.LostKeys[0].After) // the last key that reads
	if err := plan.Apply(mem, nil); err != nil {
		t.Fatal(err)
	}
	s := reopen(t, mem, opts)
	want := map[string]string{}
	for i := range 60 {
		k := fmt.Sprintf("k%02d", i)
		if i >= 20 || k <= last {
			want[k] = fmt.Sprintf("value %02d", i)
		}
	}
	if diff := cmp.Diff(want, dumpStore(s)); diff != "" {
		t.Errorf("after the repair (-want +got):\n%s", diff)
	}
	if len(want) < 55 {
		t.Errorf("only %d keys kept: the snapshot's readable entries were not", len(want))
	}
	if s.Revision() <= 60 {
		t.Errorf("revision %d: the repair's skip is missing", s.Revision())
	}
}

// TestRepairListsDropped: a repair that cuts the log names every record it
// drops, with its revision, file and offset, before it runs.
func TestRepairListsDropped(t *testing.T) {
	mem, _ := salvageStore(t)
	segs, _ := wal.ListSegments(mem, "/data")
	name := wal.SegmentPath("/data", segs[0]) // the first after the snapshot
	var offs []int64
	rd := &wal.Reader{FS: mem, Dir: "/data"}
	if _, err := rd.Scan(segs[0], false, func(r wal.Record) error { offs = append(offs, r.Offset); return nil }); err != nil {
		t.Fatal(err)
	}
	b, _ := vfs.ReadFile(mem, name)
	b[offs[2]+30] ^= 0x20 // the third record of the segment: revision 23
	rewriteFile(t, mem, name, b)
	plan, err := recovery.PlanRepair(mem, "/data")
	if err != nil {
		t.Fatal(err)
	}
	var revs []int
	keys := map[string]bool{}
	for _, d := range plan.Dropped {
		revs = append(revs, int(d.Record.Revision))
		for _, op := range d.Record.Ops {
			keys[string(op.Key)] = true
		}
	}
	// Revision 23 is unreadable; 24 to 60 read and are dropped.
	if len(revs) != 37 || revs[0] != 24 || revs[len(revs)-1] != 60 || !keys["k59"] || keys["k22"] {
		t.Errorf("dropped revisions %v, keys %v", revs, keys)
	}
	if len(plan.Unreadable) == 0 || !strings.Contains(plan.Unreadable[0], name) {
		t.Errorf("unreadable %q, want the damaged record of %s", plan.Unreadable, name)
	}
}
