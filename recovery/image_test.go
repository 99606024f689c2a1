package recovery_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// toImage rewrites the snapshot of dir (versions 1 or 2) as an image,
// version 4, with the same first record, leases and entries, as
// image.Write publishes it.
func toImage(tb testing.TB, fsys vfs.FS, dir string) {
	tb.Helper()
	meta, leases, seq := readSnapshotOf(tb, fsys, dir)
	if err := image.Write(fsys, dir, snapshot.Name, meta, leases, seq, image.Options{Seed: 0x5eed}); err != nil {
		tb.Fatal(err)
	}
	if v := snapshotVersion(tb, fsys, dir); v != image.Version {
		tb.Fatalf("snapshot of version %d after image.Write", v)
	}
}

// readSnapshotOf reads the snapshot of dir (any version): its first
// record, its leases and its entries (copies), as a sequence.
func readSnapshotOf(tb testing.TB, fsys vfs.FS, dir string) (snapshot.Meta, []record.Lease, iter.Seq[*record.Entry]) {
	tb.Helper()
	var meta snapshot.Meta
	var leases []record.Lease
	var entries []record.Entry
	err := image.ReadAny(fsys, path.Join(dir, snapshot.Name), func(m snapshot.Meta) error { meta = m; return nil },
		func(le *record.Lease) error { leases = append(leases, *le); return nil },
		func(e *record.Entry) error {
			c := *e
			c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
			entries = append(entries, c)
			return nil
		})
	if err != nil {
		tb.Fatal(err)
	}
	return meta, leases, func(yield func(*record.Entry) bool) {
		for i := range entries {
			if !yield(&entries[i]) {
				return
			}
		}
	}
}

// toFrames rewrites the snapshot of dir (any version) in frames, version
// 2 (1 without leases), as snapshot.WriteLeases publishes it.
func toFrames(tb testing.TB, fsys vfs.FS, dir string) {
	tb.Helper()
	meta, leases, seq := readSnapshotOf(tb, fsys, dir)
	if err := snapshot.WriteLeases(fsys, dir, meta, leases, seq); err != nil {
		tb.Fatal(err)
	}
}

// snapshotVersion returns the format version in the header of dir's
// snapshot.
func snapshotVersion(tb testing.TB, fsys vfs.FS, dir string) uint16 {
	tb.Helper()
	b, err := vfs.ReadFile(fsys, path.Join(dir, snapshot.Name))
	if err != nil || len(b) < 8 {
		tb.Fatalf("snapshot: %d bytes, %v", len(b), err)
	}
	return binary.LittleEndian.Uint16(b[6:])
}

// recovered is what a recovery gives, for comparison.
type recovered struct {
	Map      map[string]string
	Entries  []string // key, value and revisions
	Leases   []record.Lease
	Revision record.Revision
	Covered  uint64
	Count    uint64
	Leased   uint64
}

func recoverState(tb testing.TB, fsys vfs.FS, dir string, opts recovery.Options) recovered {
	tb.Helper()
	res, err := recovery.Recover(fsys, dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if res.Writer != nil {
		res.Writer.Close()
	}
	if !res.HadSnapshot {
		tb.Fatal("no snapshot loaded")
	}
	out := recovered{Map: dump(res.Map), Leases: res.Leases.All(), Revision: res.Map.Revision(),
		Covered: uint64(res.Snapshot.Covered), Count: res.Snapshot.Count, Leased: res.Snapshot.Leases}
	for e := range res.Map.All(nil, nil) {
		out.Entries = append(out.Entries, fmt.Sprintf("%s=%s %d/%d v%d", e.Key, e.Value, e.CreateRev, e.ModRev, e.Version))
	}
	return out
}

// leaseDir is a directory whose snapshot holds leases (leaseLog, then a
// checkpoint), with records after it in the next segment.
func leaseDir(tb testing.TB) (*vfs.MemFS, string) {
	tb.Helper()
	fsys, dir := newDir(tb)
	writeRecords(tb, fsys, dir, 1, leaseLog())
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if !res.Checkpointed {
		tb.Fatal("no checkpoint")
	}
	for _, rec := range []record.Record{put(11, "plain", "y"), putLease(12, "e", "1", 1), leaseRec(13, record.LeaseRevoke, 1, 0, 0, "a", "d", "e")} {
		if _, err := res.Writer.Append(record.Append(nil, &rec)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := res.Writer.Sync(); err != nil {
		tb.Fatal(err)
	}
	res.Writer.Close()
	return fsys, dir
}

// TestRecoverImage: a directory whose snapshot is an image (version 4)
// recovers to the same map, entries and leases, at the same revision and
// coverage, as the same directory with the snapshot in frames (version
// 2), read-only and writing; a writing recovery replays the records after
// it and checkpoints, and the next recovery agrees. Shown to fail when
// ReadAny leaves an image's leases out (res.Leases differs).
func TestRecoverImage(t *testing.T) {
	fsys, dir := leaseDir(t)
	toFrames(t, fsys, dir)
	if v := snapshotVersion(t, fsys, dir); v != snapshot.Version {
		t.Fatalf("the frames snapshot is of version %d", v)
	}
	// Only the snapshot, before the records after it: leases live.
	snapOnly := fsys.Clone()
	for _, n := range mustList(t, snapOnly, dir) {
		if strings.HasPrefix(n, "log.") && n != "log.000002" {
			t.Fatalf("unexpected segment %s", n)
		}
	}
	frames := fsys.Clone()
	img := fsys.Clone()
	toImage(t, img, dir)
	for _, ro := range []bool{true, false} {
		t.Run(fmt.Sprintf("readonly=%v", ro), func(t *testing.T) {
			want := recoverState(t, frames.Clone(), dir, recovery.Options{ReadOnly: ro})
			got := recoverState(t, img.Clone(), dir, recovery.Options{ReadOnly: ro})
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("image against frames (-want +got):\n%s", d)
			}
		})
	}
	// The snapshot alone: its leases are live in the recovered table.
	want := snapshotLeases(t, frames, dir)
	got := snapshotLeases(t, img, dir)
	if len(want) == 0 {
		t.Fatal("the snapshot holds no lease")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the snapshot's leases, image against frames (-want +got):\n%s", d)
	}
	// A writing recovery replays and checkpoints; the next one agrees.
	w := img.Clone()
	first := recoverState(t, w, dir, recovery.Options{})
	again := recoverState(t, w, dir, recovery.Options{})
	if d := cmp.Diff(first.Map, again.Map); d != "" {
		t.Errorf("second recovery (-want +got):\n%s", d)
	}
}

// snapshotLeases returns the leases recovery loads from dir's snapshot
// alone (the segment after it emptied of records).
func snapshotLeases(tb testing.TB, fsys *vfs.MemFS, dir string) []record.Lease {
	tb.Helper()
	var out []record.Lease
	err := image.ReadAny(fsys, path.Join(dir, snapshot.Name), nil, func(le *record.Lease) error {
		out = append(out, *le)
		return nil
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// imageDir is a directory whose snapshot is an image of n keys, without
// leases, covering log.000001 at revision n, and log.000002 holding two
// records after it; it returns the map recovery must give.
func imageDir(tb testing.TB, n int, leases bool) (*vfs.MemFS, string, map[string]string) {
	tb.Helper()
	fsys, dir := newDir(tb)
	want := map[string]string{}
	var entries []record.Entry
	for i := range n {
		k, v := fmt.Sprintf("key%04d", i), strings.Repeat(string(rune('a'+i%26)), 40+i%17)
		entries = append(entries, record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: record.Revision(i + 1), ModRev: record.Revision(i + 1), Version: 1})
		want[k] = v
	}
	var les []record.Lease
	if leases {
		les = []record.Lease{{ID: 1, TTL: 10e9, Deadline: 1000e9, Keys: [][]byte{[]byte("key0003")}}}
	}
	seq := func(yield func(*record.Entry) bool) {
		for i := range entries {
			if !yield(&entries[i]) {
				return
			}
		}
	}
	meta := snapshot.Meta{Covered: 1, Revision: record.Revision(n)}
	if err := image.Write(fsys, dir, snapshot.Name, meta, les, seq, image.Options{Seed: 7}); err != nil {
		tb.Fatal(err)
	}
	writeRecords(tb, fsys, dir, 2, []record.Record{put(record.Revision(n+1), "zz", "1"), put(record.Revision(n+2), "key0000", "new")})
	want["zz"], want["key0000"] = "1", "new"
	return fsys, dir, want
}

// TestImageDamage: a byte flipped in an image's block, hash index or
// footer. Recover refuses it naming the snapshot and the damaged block,
// page or footer, and changes nothing; Check reports it there; Salvage
// keeps every block that verifies and names the rest; PlanRepair and
// Apply make the directory open again, keeping the entries that read
// (written again as a snapshot) when no lease can be lost, and setting
// the image aside otherwise.
func TestImageDamage(t *testing.T) {
	const n = 400
	_, _, full := imageDir(t, n, false)
	probe, dir, _ := imageDir(t, n, false)
	b, err := vfs.ReadFile(probe, path.Join(dir, snapshot.Name))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(b))
	footer := size - image.FooterSize
	lastHash := footer - image.PageSize
	// Block 1 starts at page 2 (every block here is one page); a byte of
	// the value of its first entry, so that a reader that skips the
	// block's checksum returns a wrong value.
	block1 := int64(2 * image.PageSize)
	at := int64(binary.LittleEndian.Uint16(b[block1+12:]))
	valueByte := block1 + at + 32 + int64(binary.LittleEndian.Uint32(b[block1+at+24:])) + 3
	r, err := image.Open(probe, path.Join(dir, snapshot.Name))
	if err != nil {
		t.Fatal(err)
	}
	var block1Keys []string
	for e, err := range r.All(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		block1Keys = append(block1Keys, string(e.Key))
	}
	r.Close()
	// The keys of block 1: those whose entry lies in page 2.
	lost := blockKeys(t, b, 2)
	if len(lost) == 0 || len(lost) == len(block1Keys) {
		t.Fatalf("block 1 holds %d of %d keys", len(lost), len(block1Keys))
	}
	for _, tc := range []struct {
		name       string
		off        int64
		leases     bool
		errAt      int64 // the offset the error names
		lost       []string
		keep       bool // the repair keeps the entries that read
		salvageAll bool // Salvage reads every key
	}{
		{name: "block", off: valueByte, errAt: block1, lost: lost, keep: true},
		{name: "hash", off: lastHash + 100, errAt: lastHash, keep: true, salvageAll: true},
		{name: "footer", off: footer + 3, errAt: footer, salvageAll: true},
		{name: "block-leases", off: valueByte, leases: true, errAt: block1, lost: lost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir, _ := imageDir(t, n, tc.leases)
			name := path.Join(dir, snapshot.Name)
			flip(t, fsys, name, tc.off)
			before := files(t, fsys, dir)

			_, err := recovery.Recover(fsys, dir, recovery.Options{})
			var ce *corrupt.Error
			if !recovery.IsCorrupt(err) || !errors.Is(err, snapshot.ErrCorrupt) || !errors.As(err, &ce) || ce.File != name || ce.Offset != tc.errAt {
				t.Fatalf("Recover: %v, want snapshot corruption in %s at %d", err, name, tc.errAt)
			}
			if d := cmp.Diff(before, files(t, fsys, dir)); d != "" {
				t.Fatalf("Recover changed files (-before +after):\n%s", d)
			}
			// A read-only recovery, which writes no checkpoint, opens the
			// image without reading it whole: damage in a block shows in
			// the reads that need the block, naming it, and nowhere else.
			ro, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
			switch {
			case len(tc.lost) > 0 && err == nil:
				for _, k := range tc.lost {
					_, _, err := ro.Map.Lookup([]byte(k))
					if !errors.Is(err, snapshot.ErrCorrupt) || !errors.As(err, &ce) || ce.File != name || ce.Offset != tc.errAt {
						t.Fatalf("read-only Lookup %s in the damaged block: %v, want snapshot corruption at %d", k, err, tc.errAt)
					}
				}
				for k, v := range full {
					if slices.Contains(tc.lost, k) || k == "key0000" {
						continue
					}
					if e, ok, err := ro.Map.Lookup([]byte(k)); err != nil || !ok || string(e.Value) != v {
						t.Fatalf("read-only Lookup %s: %q %v %v, want %q", k, e.Value, ok, err, v)
					}
				}
				scanErr := errors.New("the scan ended without meeting the damage")
				for _, err := range ro.Map.All(nil, nil) {
					if err != nil {
						scanErr = err
						break
					}
				}
				if !errors.As(scanErr, &ce) || ce.Offset != tc.errAt {
					t.Fatalf("read-only scan: %v, want snapshot corruption at %d", scanErr, tc.errAt)
				}
				ro.Map.Close()
			case len(tc.lost) > 0:
				t.Fatalf("read-only Recover of an image damaged in a block the log does not touch: %v, want it open", err)
			case !recovery.IsCorrupt(err):
				t.Fatalf("read-only Recover: %v", err)
			}

			rep, err := recovery.Check(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || p.File == name && p.Offset == tc.errAt && p.Corrupt
			}
			if !found || rep.Clean() {
				t.Fatalf("Check: problems %v, want one in %s at %d", rep.Problems, name, tc.errAt)
			}

			sv, err := recovery.Salvage(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			wantSalvage := map[string]string{}
			for k, v := range full {
				wantSalvage[k] = v
			}
			wantSalvage["zz"], wantSalvage["key0000"] = "1", "new"
			for _, k := range tc.lost {
				delete(wantSalvage, k)
			}
			if d := cmp.Diff(wantSalvage, dump(sv.Map)); d != "" {
				t.Errorf("salvaged map (-want +got):\n%s", d)
			}
			if sv.Snapshot == nil || sv.Snapshot.Complete || !sv.Snapshot.MetaOK {
				t.Fatalf("salvage of the snapshot: %+v", sv.Snapshot)
			}
			if tc.salvageAll != (len(sv.Snapshot.Lost) == 0 || tc.name == "footer") {
				t.Errorf("salvage lost ranges %+v", sv.Snapshot.Lost)
			}
			if len(tc.lost) > 0 {
				l := sv.Snapshot.Lost
				if len(l) != 1 || l[0].From != block1 || l[0].To != block1+image.PageSize ||
					string(l[0].After) >= tc.lost[0] || string(l[0].Before) <= tc.lost[len(tc.lost)-1] {
					t.Errorf("salvage lost %+v, want block 1's page, around %s..%s", l, tc.lost[0], tc.lost[len(tc.lost)-1])
				}
			}
			if tc.name == "hash" && (len(sv.Snapshot.Index) != 1 || sv.Snapshot.Index[0].From != lastHash) {
				t.Errorf("salvage index damage %+v, want the hash page at %d", sv.Snapshot.Index, lastHash)
			}

			plan, err := recovery.PlanRepair(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Apply(fsys, func(s string) { t.Log(s) }); err != nil {
				t.Fatal(err)
			}
			res, err := recovery.Recover(fsys.CrashClone(), dir, recovery.Options{})
			if err != nil {
				t.Fatalf("Recover after repair: %v", err)
			}
			res.Writer.Close()
			wantRepair := map[string]string{"zz": "1", "key0000": "new"}
			if tc.keep {
				wantRepair = wantSalvage
				if v := snapshotVersion(t, fsys, dir); v != 1 {
					t.Errorf("the snapshot the repair wrote is of version %d, want 1", v)
				}
			}
			if d := cmp.Diff(wantRepair, dump(res.Map)); d != "" {
				t.Errorf("map after repair (-want +got):\n%s", d)
			}
			if !strings.Contains(strings.Join(mustList(t, fsys, dir), " "), snapshot.Name+recovery.BrokenSuffix) {
				t.Errorf("no evidence kept: %v", mustList(t, fsys, dir))
			}
		})
	}
}

// blockKeys returns the keys of the one-page block at page p of image b.
func blockKeys(tb testing.TB, b []byte, p int) []string {
	tb.Helper()
	blk := b[p*image.PageSize : (p+1)*image.PageSize]
	n := int(binary.LittleEndian.Uint16(blk[8:]))
	var out []string
	for j := range n {
		at := int(binary.LittleEndian.Uint16(blk[12+2*j:]))
		kl := int(binary.LittleEndian.Uint32(blk[at+24:]))
		out = append(out, string(blk[at+28:at+28+kl]))
	}
	return out
}

// flip flips the bits of the byte at off in file name.
func flip(tb testing.TB, fsys vfs.FS, name string, off int64) {
	tb.Helper()
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		tb.Fatal(err)
	}
	b[off] ^= 0xff
	rewrite(tb, fsys, name, b)
}
