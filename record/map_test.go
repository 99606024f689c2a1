package record_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kvstore/kv/record"
	"pgregory.net/rapid"
)

// entry is an Entry in a form that prints well in a diff.
type entry struct {
	Key, Value        string
	CreateRev, ModRev record.Revision
	Version           int64
}

// dump returns the map's entries in key order, checking the map's
// invariants as it finds it, and that Bytes and Len agree with the entries.
func dump(tb interface {
	Helper()
	Errorf(string, ...any)
}, m *record.Map) []entry {
	tb.Helper()
	if err := m.CheckInvariants(); err != nil {
		tb.Errorf("before All: %v", err)
	}
	var es []entry
	var size int64
	for e := range m.All(nil, nil) {
		if len(es) > 0 && es[len(es)-1].Key >= string(e.Key) {
			tb.Errorf("All yields %q after %q", e.Key, es[len(es)-1].Key)
		}
		es = append(es, entry{string(e.Key), string(e.Value), e.CreateRev, e.ModRev, e.Version})
		size += int64(len(e.Key) + len(e.Value))
	}
	if m.Len() != len(es) {
		tb.Errorf("Len() = %d, All yields %d entries", m.Len(), len(es))
	}
	if m.Bytes() != size {
		tb.Errorf("Bytes() = %d, keys and values hold %d", m.Bytes(), size)
	}
	return es
}

func applyAll(tb testing.TB, m *record.Map, recs ...record.Record) {
	tb.Helper()
	for i := range recs {
		if err := m.Apply(&recs[i]); err != nil {
			tb.Fatalf("Apply(%+v): %v", recs[i], err)
		}
		checkInvariants(tb, m)
	}
}

// checkInvariants fails the test when m breaks its invariants.
func checkInvariants(tb interface {
	Helper()
	Fatalf(string, ...any)
}, m *record.Map) {
	tb.Helper()
	if err := m.CheckInvariants(); err != nil {
		tb.Fatalf("invariants: %v", err)
	}
}

func TestApply(t *testing.T) {
	maxInt := strconv.FormatInt(math.MaxInt64, 10)
	minInt := strconv.FormatInt(math.MinInt64, 10)
	tests := []struct {
		name    string
		setup   []record.Record
		rec     record.Record
		wantErr error // nil: success; else the map must be as after setup
		want    []entry
		wantRev record.Revision
	}{
		{
			name:    "put creates",
			rec:     put(1, "a", "1"),
			want:    []entry{{"a", "1", 1, 1, 1}},
			wantRev: 1,
		},
		{
			name:    "put again keeps CreateRev and bumps Version",
			setup:   []record.Record{put(1, "a", "1"), put(2, "b", "x"), put(3, "a", "2")},
			rec:     put(4, "a", "3"),
			want:    []entry{{"a", "3", 1, 4, 3}, {"b", "x", 2, 2, 1}},
			wantRev: 4,
		},
		{
			name:    "empty key and value",
			rec:     put(1, "", ""),
			want:    []entry{{"", "", 1, 1, 1}},
			wantRev: 1,
		},
		{
			name:    "delete",
			setup:   []record.Record{put(1, "a", "1"), put(2, "b", "2")},
			rec:     del(3, "a"),
			want:    []entry{{"b", "2", 2, 2, 1}},
			wantRev: 3,
		},
		{
			name:    "delete of a missing key still takes the revision",
			setup:   []record.Record{put(1, "a", "1")},
			rec:     del(2, "zz"),
			want:    []entry{{"a", "1", 1, 1, 1}},
			wantRev: 2,
		},
		{
			name:    "put after delete starts a new life",
			setup:   []record.Record{put(1, "a", "1"), put(2, "a", "2"), del(3, "a")},
			rec:     put(4, "a", "new"),
			want:    []entry{{"a", "new", 4, 4, 1}},
			wantRev: 4,
		},
		{
			name:    "add on a missing key starts at 0",
			rec:     add(1, "n", 5),
			want:    []entry{{"n", "5", 1, 1, 1}},
			wantRev: 1,
		},
		{
			name:    "add negative delta",
			setup:   []record.Record{put(1, "n", "10")},
			rec:     add(2, "n", -15),
			want:    []entry{{"n", "-5", 1, 2, 2}},
			wantRev: 2,
		},
		{
			name:    "add up to MaxInt64",
			setup:   []record.Record{put(1, "n", strconv.FormatInt(math.MaxInt64-1, 10))},
			rec:     add(2, "n", 1),
			want:    []entry{{"n", maxInt, 1, 2, 2}},
			wantRev: 2,
		},
		{
			name:    "add down to MinInt64",
			setup:   []record.Record{put(1, "n", "-1")},
			rec:     add(2, "n", math.MinInt64+1),
			want:    []entry{{"n", minInt, 1, 2, 2}},
			wantRev: 2,
		},
		{
			name:    "add on a non-integer",
			setup:   []record.Record{put(1, "n", "abc")},
			rec:     add(2, "n", 1),
			wantErr: record.ErrNotInteger,
		},
		{
			name:    "add on an empty value",
			setup:   []record.Record{put(1, "n", "")},
			rec:     add(2, "n", 1),
			wantErr: record.ErrNotInteger,
		},
		{
			name:    "add on a number with spaces",
			setup:   []record.Record{put(1, "n", " 1")},
			rec:     add(2, "n", 1),
			wantErr: record.ErrNotInteger,
		},
		{
			name:    "add on a number past int64",
			setup:   []record.Record{put(1, "n", "9223372036854775808")},
			rec:     add(2, "n", -1),
			wantErr: record.ErrNotInteger,
		},
		{
			name:    "overflow",
			setup:   []record.Record{put(1, "n", maxInt)},
			rec:     add(2, "n", 1),
			wantErr: record.ErrOverflow,
		},
		{
			name:    "underflow",
			setup:   []record.Record{put(1, "n", minInt)},
			rec:     add(2, "n", -1),
			wantErr: record.ErrOverflow,
		},
		{
			name:    "overflow from a missing key",
			setup:   []record.Record{add(1, "n", math.MaxInt64)},
			rec:     add(2, "n", math.MaxInt64),
			wantErr: record.ErrOverflow,
		},
		{
			name:    "txn whose third op fails leaves the map unchanged",
			setup:   []record.Record{put(1, "a", "1"), put(2, "s", "text")},
			rec:     txn(3, opPut("a", "2"), opDel("a"), opAdd("s", 1), opPut("z", "z")),
			wantErr: record.ErrNotInteger,
		},
		{
			name:    "txn whose last op overflows leaves the map unchanged",
			setup:   []record.Record{put(1, "n", maxInt)},
			rec:     txn(2, opPut("new", "1"), opDel("n"), opAdd("n", 1), opAdd("n", math.MaxInt64)),
			wantErr: record.ErrOverflow,
		},
		{
			name:    "later ops in a txn see earlier ones",
			setup:   []record.Record{put(1, "old", "1")},
			rec:     txn(2, opPut("a", "5"), opAdd("a", 3), opPut("b", "1"), opDel("b"), opAdd("old", 1), opDel("old"), opAdd("old", 7)),
			want:    []entry{{"a", "8", 2, 2, 2}, {"old", "7", 2, 2, 1}},
			wantRev: 2,
		},
		{
			name:    "txn delete then put recreates",
			setup:   []record.Record{put(1, "a", "1"), put(2, "a", "2")},
			rec:     txn(3, opDel("a"), opPut("a", "new")),
			want:    []entry{{"a", "new", 3, 3, 1}},
			wantRev: 3,
		},
		{
			name:    "txn of puts and deletes: each op sees the ones before it",
			setup:   []record.Record{put(1, "a", "1")},
			rec:     txn(2, opPut("a", "2"), opPut("a", "3"), opDel("b"), opPut("b", "x"), opDel("b"), opPut("c", "1")),
			want:    []entry{{"a", "3", 1, 2, 3}, {"c", "1", 2, 2, 1}},
			wantRev: 2,
		},
		{
			name:    "txn without ops takes the revision",
			setup:   []record.Record{put(1, "a", "1")},
			rec:     record.Record{Revision: 2, Txn: true, Compares: []record.Compare{{Key: []byte("a"), Target: record.TargetExists, Cmp: record.CmpEqual, Num: 0}}},
			want:    []entry{{"a", "1", 1, 1, 1}},
			wantRev: 2,
		},
		{
			name:    "failed branch: its ops apply, compares are not re-evaluated",
			setup:   []record.Record{put(1, "a", "1")},
			rec:     record.Record{Revision: 2, Txn: true, Succeeded: false, Compares: []record.Compare{{Key: []byte("a"), Target: record.TargetExists, Cmp: record.CmpEqual, Num: 1}}, Ops: []record.Op{opPut("else", "x")}},
			want:    []entry{{"a", "1", 1, 1, 1}, {"else", "x", 2, 2, 1}},
			wantRev: 2,
		},
		{
			name:    "unknown op kind",
			setup:   []record.Record{put(1, "a", "1")},
			rec:     record.Record{Revision: 2, Ops: []record.Op{{Kind: 9, Key: []byte("a")}}},
			wantErr: record.ErrCorrupt,
		},
		{
			name:    "unknown op kind in a txn",
			setup:   []record.Record{put(1, "a", "1")},
			rec:     txn(2, opPut("b", "2"), record.Op{Kind: record.KindTxn, Key: []byte("a")}),
			wantErr: record.ErrCorrupt,
		},
	}
	for _, tt := range tests {
		for _, deferred := range []bool{false, true} {
			name := tt.name
			if deferred {
				name += "/deferred" // the replay's mode: no tree until Build
			}
			t.Run(name, func(t *testing.T) {
				m := record.NewMap()
				applyAll(t, m, tt.setup...)
				before, beforeRev := dump(t, m), m.Revision()
				if deferred {
					m.Defer()
				}
				err := m.Apply(&tt.rec)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("Apply: %v, want %v", err, tt.wantErr)
					}
					if diff := cmp.Diff(before, dump(t, m)); diff != "" {
						t.Errorf("a failed Apply changed the map (-before +after):\n%s", diff)
					}
					if m.Revision() != beforeRev {
						t.Errorf("a failed Apply moved the revision from %d to %d", beforeRev, m.Revision())
					}
					return
				}
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if diff := cmp.Diff(tt.want, dump(t, m)); diff != "" {
					t.Errorf("map (-want +got):\n%s", diff)
				}
				if m.Revision() != tt.wantRev {
					t.Errorf("Revision() = %d, want %d", m.Revision(), tt.wantRev)
				}
			})
		}
	}
}

// TestApplyCopies checks that entries do not alias the record: Decode
// returns slices of the payload, whose buffer the WAL reader reuses.
func TestApplyCopies(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  record.Record
	}{
		{"put", put(1, "key", "value")},
		{"txn", txn(1, opPut("key", "value"), opPut("other", "x"))},
		{"add", add(1, "key", 12)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := record.Append(nil, &tt.rec)
			r, err := record.Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			m := record.NewMap()
			if err := m.Apply(&r); err != nil {
				t.Fatal(err)
			}
			want := dump(t, m)
			for i := range p {
				p[i] = '#'
			}
			if diff := cmp.Diff(want, dump(t, m)); diff != "" {
				t.Errorf("overwriting the payload changed the map (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClone(t *testing.T) {
	m := record.NewMap()
	applyAll(t, m, put(1, "a", "1"), put(2, "b", "2"), add(3, "n", 10))
	c := m.Clone()
	snap := dump(t, c)
	ea, _ := c.Get([]byte("a"))
	held := entry{string(ea.Key), string(ea.Value), ea.CreateRev, ea.ModRev, ea.Version}

	// Changes to the original do not show in the clone.
	applyAll(t, m, put(4, "a", "changed"), del(5, "b"), add(6, "n", 1), put(7, "z", "new"),
		txn(8, opPut("c", "3"), opDel("a")))
	if diff := cmp.Diff(snap, dump(t, c)); diff != "" {
		t.Errorf("clone after changes to the original (-want +got):\n%s", diff)
	}
	if c.Revision() != 3 {
		t.Errorf("clone revision %d, want 3", c.Revision())
	}
	if diff := cmp.Diff(held, entry{string(ea.Key), string(ea.Value), ea.CreateRev, ea.ModRev, ea.Version}); diff != "" {
		t.Errorf("an entry taken from the clone changed (-want +got):\n%s", diff)
	}
	wantOrig := []entry{{"c", "3", 8, 8, 1}, {"n", "11", 3, 6, 2}, {"z", "new", 7, 7, 1}}
	if diff := cmp.Diff(wantOrig, dump(t, m)); diff != "" {
		t.Errorf("original (-want +got):\n%s", diff)
	}

	// Nor the other way round.
	applyAll(t, c, put(4, "only-in-clone", "x"), del(5, "n"))
	if diff := cmp.Diff(wantOrig, dump(t, m)); diff != "" {
		t.Errorf("original after changes to the clone (-want +got):\n%s", diff)
	}
	if _, ok := m.Get([]byte("only-in-clone")); ok {
		t.Error("a key put in the clone shows in the original")
	}
}

func TestAllRange(t *testing.T) {
	m := record.NewMap()
	applyAll(t, m, put(1, "a", "1"), put(2, "b", "2"), put(3, "c", "3"), put(4, "d", "4"))
	tests := []struct {
		name       string
		start, end []byte
		want       []string
	}{
		{"everything", nil, nil, []string{"a", "b", "c", "d"}},
		{"from b", []byte("b"), nil, []string{"b", "c", "d"}},
		{"b up to d", []byte("b"), []byte("d"), []string{"b", "c"}},
		{"between keys", []byte("aa"), []byte("cc"), []string{"b", "c"}},
		{"empty range", []byte("c"), []byte("c"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for e := range m.All(tt.start, tt.end) {
				got = append(got, string(e.Key))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("All (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"-12", -12, false},
		{"9223372036854775807", math.MaxInt64, false},
		{"-9223372036854775808", math.MinInt64, false},
		{"9223372036854775808", 0, true},
		{"", 0, true},
		{"1.5", 0, true},
		{"0x10", 0, true},
		{"12 ", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := record.ParseInt([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, record.ErrNotInteger) {
					t.Errorf("ParseInt(%q): %d, %v; want ErrNotInteger", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseInt(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNextAndDelete(t *testing.T) {
	old := &record.Entry{Key: []byte("n"), Value: []byte("4"), CreateRev: 2, ModRev: 3, Version: 2}
	tests := []struct {
		name    string
		old     *record.Entry
		op      record.Op
		want    *record.Entry
		wantErr error
	}{
		{name: "put on nothing", op: opPut("n", "1"), want: &record.Entry{Key: []byte("n"), Value: []byte("1"), CreateRev: 9, ModRev: 9, Version: 1}},
		{name: "put over an entry", old: old, op: opPut("n", "1"), want: &record.Entry{Key: []byte("n"), Value: []byte("1"), CreateRev: 2, ModRev: 9, Version: 3}},
		{name: "add over an entry", old: old, op: opAdd("n", -5), want: &record.Entry{Key: []byte("n"), Value: []byte("-1"), CreateRev: 2, ModRev: 9, Version: 3}},
		{name: "delete", old: old, op: opDel("n")},
		{name: "add over a non-integer", old: &record.Entry{Key: []byte("n"), Value: []byte("x")}, op: opAdd("n", 1), wantErr: record.ErrNotInteger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := record.Next(tt.old, &tt.op, 9)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Next: %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
	// Next never changes the old entry: entries are immutable.
	if diff := cmp.Diff(&record.Entry{Key: []byte("n"), Value: []byte("4"), CreateRev: 2, ModRev: 3, Version: 2}, old); diff != "" {
		t.Errorf("Next changed the old entry (-want +got):\n%s", diff)
	}

	m := record.NewMap()
	applyAll(t, m, put(1, "a", "1"), put(2, "bb", "22"))
	m.Delete([]byte("a"))
	m.Delete([]byte("missing"))
	if diff := cmp.Diff([]entry{{"bb", "22", 2, 2, 1}}, dump(t, m)); diff != "" {
		t.Errorf("after Delete (-want +got):\n%s", diff)
	}
}

// TestLater checks LoadLater and DeleteLater against Load and Delete: with
// Flush, Clone and All at random points between them, the two maps hold
// the same entries, and a clone taken before later changes keeps its own.
func TestLater(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		eager, lazy := record.NewMap(), record.NewMap()
		var clones []*record.Map
		var want [][]entry
		rev := record.Revision(0)
		key := rapid.StringMatching(`[a-e]{1,2}`)
		// Both maps start from a tree made by Build (the end of a replay),
		// whose order is special while it is built.
		eager.Defer()
		lazy.Defer()
		for range rapid.IntRange(0, 30).Draw(t, "preload") {
			rev++
			k := key.Draw(t, "key")
			e := &record.Entry{Key: []byte(k), Value: []byte("pre"), CreateRev: rev, ModRev: rev, Version: 1}
			eager.Load(e)
			lazy.Load(e)
		}
		eager.Build()
		lazy.Build()
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1, 2:
				rev++
				k := key.Draw(t, "key")
				old, _ := eager.Get([]byte(k))
				e, err := record.Next(old, &record.Op{Kind: record.KindPut, Key: []byte(k),
					Value: []byte(rapid.StringMatching(`[x-z]{0,3}`).Draw(t, "value"))}, rev)
				if err != nil {
					t.Fatal(err)
				}
				eager.Load(e)
				lazy.LoadLater(e)
			case 3:
				k := []byte(key.Draw(t, "key"))
				eager.Delete(k)
				lazy.DeleteLater(k)
			case 4:
				if rapid.Bool().Draw(t, "whole") {
					lazy.Flush()
					break
				}
				// A part, newest first, as the store's flusher takes them.
				before := lazy.UnflushedForTesting()
				n := rapid.IntRange(0, 4).Draw(t, "part")
				if left := lazy.FlushSome(n); left != max(before-n, 0) || lazy.UnflushedForTesting() != left {
					t.Fatalf("FlushSome(%d) of %d: %d left, Unflushed %d", n, before, left, lazy.UnflushedForTesting())
				}
			case 5:
				clones = append(clones, lazy.Clone())
				want = append(want, dump(t, eager))
			}
			checkInvariants(t, eager)
			checkInvariants(t, lazy)
			k := []byte(key.Draw(t, "probe"))
			ge, gok := eager.Get(k)
			le, lok := lazy.Get(k)
			if gok != lok || !cmp.Equal(ge, le) {
				t.Fatalf("Get(%q): eager %v %v, lazy %v %v", k, ge, gok, le, lok)
			}
			if eager.Len() != lazy.Len() || eager.Bytes() != lazy.Bytes() {
				t.Fatalf("Len, Bytes: eager %d %d, lazy %d %d", eager.Len(), eager.Bytes(), lazy.Len(), lazy.Bytes())
			}
		}
		if diff := cmp.Diff(dump(t, eager), dump(t, lazy)); diff != "" {
			t.Fatalf("lazy map (-eager +lazy):\n%s", diff)
		}
		for i, c := range clones {
			if diff := cmp.Diff(want[i], dump(t, c)); diff != "" {
				t.Fatalf("clone %d (-want +got):\n%s", i, diff)
			}
		}
	})
}

// TestArena checks the map against a plain Go map while its arena is
// compacted at every chance (the dead-space floor set to 0): records of
// puts, adds and deletes, deferred stretches with their in-place
// overwrites, later changes, clones, and entries held across all of it.
// Each clone must keep the state it was taken at, and each entry handed
// out before an evacuation must keep its bytes.
func TestArena(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := record.NewMapWith(
			// Every dead byte is worth an evacuation.
			record.CompactMin(0),
			// Chunks of one to three entries, and entries of 40 bytes or
			// more in an allocation of their own, so that chunks die and
			// get evacuated within a few steps.
			record.ChunkSizes(64, 128, 40),
			// Past 16 slots, rehashes read the keys, as past 4M in use.
			record.StoredHashSlots(16),
			// One entry copied per change: evacuations span many steps.
			record.EvacuateStep(1),
			// Trees built by BuildAsync stay pending until released.
			record.HeldBuilds(),
		)
		release := m.ReleaseBuilds
		defer release()
		pending := false
		model := map[string]entry{}
		type held struct {
			e    *record.Entry
			want entry
		}
		var helds []held
		var clones []*record.Map
		var want [][]entry
		rev := record.Revision(0)
		key := rapid.StringMatching(`[a-f]{0,3}`)
		value := rapid.StringMatching(`[x-z0-9]{0,4}`)
		deferred := false
		snapshot := func() []entry {
			es := make([]entry, 0, len(model))
			for _, e := range model {
				es = append(es, e)
			}
			slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.Key, b.Key) })
			return es
		}
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			switch rapid.IntRange(0, 11).Draw(t, "op") {
			case 0, 1, 2: // a put
				rev++
				k, v := key.Draw(t, "key"), value.Draw(t, "value")
				r := put(rev, k, v)
				if err := m.Apply(&r); err != nil {
					t.Fatal(err)
				}
				e := entry{k, v, rev, rev, 1}
				if old, ok := model[k]; ok {
					e.CreateRev, e.Version = old.CreateRev, old.Version+1
				}
				model[k] = e
			case 3: // an add, which fails on a value that is not a number
				rev++
				k := key.Draw(t, "key")
				r := add(rev, k, 1)
				err := m.Apply(&r)
				old, ok := model[k]
				n, perr := strconv.ParseInt(old.Value, 10, 64)
				if ok && perr != nil {
					if !errors.Is(err, record.ErrNotInteger) {
						t.Fatalf("add on %q: %v, want ErrNotInteger", old.Value, err)
					}
					rev--
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				e := entry{k, strconv.FormatInt(n+1, 10), rev, rev, 1}
				if ok {
					e.CreateRev, e.Version = old.CreateRev, old.Version+1
				}
				model[k] = e
			case 4: // a delete, now or later
				k := key.Draw(t, "key")
				if rapid.Bool().Draw(t, "later") {
					m.DeleteLater([]byte(k))
				} else {
					m.Delete([]byte(k))
				}
				delete(model, k)
			case 5: // a put loaded later
				rev++
				k, v := key.Draw(t, "key"), value.Draw(t, "value")
				e := entry{k, v, rev, rev, 1}
				if old, ok := model[k]; ok {
					e.CreateRev, e.Version = old.CreateRev, old.Version+1
				}
				m.LoadLater(&record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: e.CreateRev, ModRev: rev, Version: e.Version})
				model[k] = e
			case 6: // into or out of a deferred stretch
				if pending {
					release() // Build and Defer wait for the tree
					pending = false
				}
				switch {
				case !deferred:
					m.Defer()
				case rapid.Bool().Draw(t, "async"):
					m.BuildAsync() // entries stop changing in place
					pending = true
				default:
					m.Build()
				}
				deferred = !deferred
			case 7: // a clone, which ends a deferred stretch
				clones = append(clones, m.Clone())
				want = append(want, snapshot())
				deferred = false
			case 8: // hold an entry
				k := key.Draw(t, "key")
				if e, ok := m.Get([]byte(k)); ok && !deferred {
					helds = append(helds, held{e, model[k]})
				}
			case 9: // the pending tree is built
				release()
				pending = false
			case 10: // a flush, which takes a tree built in the meantime
				m.Flush()
			case 11: // a run of loads, as of a snapshot: a deferred map
				// leaves up to 16 of them out of its index for a while
				for range rapid.IntRange(1, 40).Draw(t, "loads") {
					rev++
					loadModel(m, model, rev, key.Draw(t, "key"), value.Draw(t, "value"))
				}
			}
			// Checked as it is: loads may be left out of the index.
			checkInvariants(t, m)
			if !rapid.Bool().Draw(t, "check") {
				continue // loads left out of the index meet the next step
			}
			k := key.Draw(t, "probe")
			got, ok := m.Lookup([]byte(k))
			w, wok := model[k]
			if ok != wok || (ok && w != (entry{string(got.Key), string(got.Value), got.CreateRev, got.ModRev, got.Version})) {
				t.Fatalf("Lookup(%q) = %+v %v, want %+v %v", k, got, ok, w, wok)
			}
			if m.Len() != len(model) {
				t.Fatalf("Len() = %d, want %d", m.Len(), len(model))
			}
			checkInvariants(t, m)
		}
		release()
		if diff := cmp.Diff(snapshot(), dump(t, m), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("map (-model +map):\n%s", diff)
		}
		for i, c := range clones {
			if diff := cmp.Diff(want[i], dump(t, c), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("clone %d (-want +got):\n%s", i, diff)
			}
		}
		for _, h := range helds {
			e := h.e
			if got := (entry{string(e.Key), string(e.Value), e.CreateRev, e.ModRev, e.Version}); got != h.want {
				t.Fatalf("an entry held changed: %+v, was %+v", got, h.want)
			}
		}
	})
}

// TestEntrySizes puts entries of sizes around every chunk boundary, from
// empty values to values past the size that gets an allocation of its
// own, and reads each back.
func TestEntrySizes(t *testing.T) {
	m := record.NewMap()
	var sizes []int
	for _, s := range []int{0, 1, 4 << 10, 64 << 10, 1 << 20} {
		for d := -40; d <= 40; d += 8 {
			if s+d >= 0 {
				sizes = append(sizes, s+d)
			}
		}
	}
	for i, n := range sizes {
		r := put(record.Revision(i+1), fmt.Sprintf("k%03d", i), strings.Repeat("v", n))
		if err := m.Apply(&r); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range sizes {
		e, ok := m.Lookup([]byte(fmt.Sprintf("k%03d", i)))
		if !ok || len(e.Value) != n || string(e.Value) != strings.Repeat("v", n) {
			t.Fatalf("key %d: value of %d bytes, want %d", i, len(e.Value), n)
		}
	}
	checkInvariants(t, m)
}

// loadModel loads into m, and into model, a put of k to v at rev.
func loadModel(m *record.Map, model map[string]entry, rev record.Revision, k, v string) {
	e := entry{k, v, rev, rev, 1}
	if old, ok := model[k]; ok {
		e.CreateRev, e.Version = old.CreateRev, old.Version+1
	}
	m.Load(&record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: e.CreateRev, ModRev: rev, Version: e.Version})
	model[k] = e
}

// TestLoadAhead loads runs of entries of a few keys into a deferred map,
// whose index takes each entry only after up to 15 more have come: with
// tiny chunks and every byte of dead space worth an evacuation, chunks
// holding entries not yet indexed are evacuated, which must not lose them.
func TestLoadAhead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := record.NewMapWith(record.CompactMin(0), record.ChunkSizes(64, 128, 60),
			record.EvacuateStep(rapid.IntRange(1, 4).Draw(t, "step")))
		m.Defer()
		model := map[string]entry{}
		key := rapid.SampledFrom([]string{"a", "b", "c", "d"})
		value := rapid.StringMatching(`[x-z]{0,20}`)
		rev := record.Revision(0)
		for range rapid.IntRange(1, 5).Draw(t, "runs") {
			for range rapid.IntRange(1, 40).Draw(t, "loads") {
				rev++
				loadModel(m, model, rev, key.Draw(t, "key"), value.Draw(t, "value"))
				checkInvariants(t, m) // with up to 15 entries left out of the index
			}
			for k, w := range model {
				got, ok := m.Lookup([]byte(k))
				if !ok || w != (entry{string(got.Key), string(got.Value), got.CreateRev, got.ModRev, got.Version}) {
					t.Fatalf("Lookup(%q) = %+v %v, want %+v", k, got, ok, w)
				}
			}
		}
	})
}

// TestTreeOrderByPrefix: the ordered tree compares the first 8 bytes of
// two keys before it reads the entries; keys shorter than 8 bytes, keys
// that end in zero bytes (padded the same as the shorter key) and keys
// that share their first 8 bytes and differ after must still come in
// bytewise order, and be found and deleted.
func TestTreeOrderByPrefix(t *testing.T) {
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "a\x00\x00\x00\x00\x00\x00\x00", "a\x00\x00\x00\x00\x00\x00\x00\x00",
		"a\x00\x01", "a\x01", "abcdefgh", "abcdefgh\x00", "abcdefgh\x01", "abcdefghi", "abcdefgi", "\xff\xff\xff\xff\xff\xff\xff\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\x00"}
	m := record.NewMap()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range rng.Perm(len(keys)) {
		if err := m.Apply(&record.Record{Revision: m.Revision() + 1, Ops: []record.Op{{Kind: record.KindPut, Key: []byte(keys[i]), Value: []byte{byte(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want []string) {
		t.Helper()
		var got []string
		for e := range m.All(nil, nil) {
			got = append(got, string(e.Key))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("All: %q\nwant %q", got, want)
		}
		for _, k := range want {
			if _, ok := m.Clone().Get([]byte(k)); !ok {
				t.Errorf("the clone's tree does not find %q", k)
			}
		}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	check(sorted)
	for _, k := range []string{"a\x00", "abcdefgh", "\x00"} {
		m.Delete([]byte(k))
		sorted = slices.DeleteFunc(sorted, func(s string) bool { return s == k })
	}
	check(sorted)
}
