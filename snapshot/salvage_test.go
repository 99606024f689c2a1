package snapshot_test

import (
	"bytes"
	"fmt"
	"path"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// salvageKeys runs Salvage on b and returns the keys it read, and what it
// reported.
func salvageKeys(t testing.TB, b []byte) ([]string, snapshot.Salvaged) {
	t.Helper()
	m := memWith(t, b)
	rec := vfs.NewRecorder(m, nil)
	var keys []string
	sv, err := snapshot.Salvage(rec, path.Join("d", snapshot.Name), func(e *record.Entry) error {
		keys = append(keys, string(e.Key))
		return nil
	})
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	// Salvage changes nothing: no event the recorder keeps (writes,
	// syncs, creates, renames, removals, truncations).
	if ev := rec.Events(); len(ev) != 0 {
		t.Fatalf("Salvage changed the file system: %v", ev)
	}
	return keys, sv
}

// bigSnapshot has 20 entries k00 .. k19.
func bigSnapshot(t testing.TB) ([]*record.Entry, []byte) {
	var entries []*record.Entry
	for i := range 20 {
		entries = append(entries, entry(fmt.Sprintf("k%02d", i), fmt.Sprintf("value %d", i), 1, record.Revision(i+1), 1))
	}
	return entries, encode(t, snapshot.Meta{Covered: 3, Revision: 40, Count: 20}, entries)
}

func keysOf(entries []*record.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, string(e.Key))
	}
	return out
}

// TestSalvage: what Salvage reads of snapshots damaged in each part: every
// entry whose frame checks out, the meta when its frame does, and the
// damaged ranges with the keys between which the lost ones lay.
func TestSalvage(t *testing.T) {
	entries, good := bigSnapshot(t)
	starts := frameStarts(good) // [meta, e0, ..., e19, end]
	all := keysOf(entries)
	tests := []struct {
		name     string
		damage   func(b []byte) []byte
		want     []string
		metaOK   bool
		complete bool
		lost     []snapshot.Lost
	}{
		{name: "intact", damage: func(b []byte) []byte { return b }, want: all, metaOK: true, complete: true},
		{name: "the tail cut off in entry 15",
			damage: func(b []byte) []byte { return b[:starts[16]+5] },
			want:   all[:15], metaOK: true,
			lost: []snapshot.Lost{{From: starts[16], To: starts[16] + 5, After: []byte("k14")}}},
		{name: "a flipped byte in entry 7",
			damage: func(b []byte) []byte { b[starts[8]+12] ^= 1; return b },
			want:   append(append([]string{}, all[:7]...), all[8:]...), metaOK: true,
			lost: []snapshot.Lost{{From: starts[8], To: starts[9], After: []byte("k06"), Before: []byte("k08")}}},
		{name: "the meta frame damaged",
			damage: func(b []byte) []byte { b[starts[0]+10] ^= 1; return b },
			want:   all,
			lost:   []snapshot.Lost{{From: starts[0], To: starts[1], Before: []byte("k00")}}},
		{name: "the end frame damaged",
			damage: func(b []byte) []byte { b[len(b)-2] ^= 1; return b },
			want:   all, metaOK: true,
			lost: []snapshot.Lost{{From: starts[21], To: int64(len(good)), After: []byte("k19")}}},
		{name: "not a snapshot",
			damage: func([]byte) []byte { return []byte("holiday photos") },
			lost:   []snapshot.Lost{{From: 0, To: 14}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, sv := salvageKeys(t, tt.damage(bytes.Clone(good)))
			if diff := cmp.Diff(tt.want, keys); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
			if sv.MetaOK != tt.metaOK || sv.Complete != tt.complete {
				t.Errorf("MetaOK %v, Complete %v; want %v, %v", sv.MetaOK, sv.Complete, tt.metaOK, tt.complete)
			}
			if tt.metaOK && (sv.Meta.Revision != 40 || sv.Meta.Covered != 3) {
				t.Errorf("meta %+v", sv.Meta)
			}
			if diff := cmp.Diff(tt.lost, sv.Lost); diff != "" {
				t.Errorf("lost (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzSalvage feeds arbitrary bytes to Salvage: it never fails on
// content and never panics, the keys it returns ascend, and when Read
// accepts the file Salvage returns the same entries and calls it
// complete.
func FuzzSalvage(f *testing.F) {
	_, good := bigSnapshot(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	_, _, small := smallSnapshot(f)
	f.Add(small)
	f.Add([]byte("KVSNAP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, sv := salvageKeys(t, b)
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Fatalf("keys out of order: %q", keys)
			}
		}
		d, err := decode(b)
		if err != nil {
			return
		}
		if !sv.Complete || !cmp.Equal(keysOf(d.Entries), keys, cmp.Transformer("", func(s []string) []string {
			if s == nil {
				return []string{}
			}
			return s
		})) {
			t.Fatalf("Read accepts the file: entries %q, Salvage read %q (complete %v)", keysOf(d.Entries), keys, sv.Complete)
		}
	})
}
