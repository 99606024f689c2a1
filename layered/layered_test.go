package layered

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// model is the reference: the state as a plain map, and its revision.
type model struct {
	m   map[string]record.Entry
	rev record.Revision
}

func (md *model) apply(r *record.Record) error {
	staged := map[string]*record.Entry{}
	var order []string
	for i := range r.Ops {
		k := string(r.Ops[i].Key)
		cur, ok := staged[k]
		if !ok {
			if e, in := md.m[k]; in {
				cur = &e
			}
			order = append(order, k)
		}
		e, err := record.Next(cur, &r.Ops[i], r.Revision)
		if err != nil {
			return err
		}
		staged[k] = e
	}
	for _, k := range order {
		if e := staged[k]; e != nil {
			md.m[k] = *e
		} else {
			delete(md.m, k)
		}
	}
	md.rev = r.Revision
	return nil
}

func (md *model) sorted() []record.Entry {
	var out []record.Entry
	for _, e := range md.m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b record.Entry) int { return cmpBytes(a.Key, b.Key) })
	return out
}

func cmpBytes(a, b []byte) int {
	switch {
	case string(a) < string(b):
		return -1
	case string(a) > string(b):
		return 1
	}
	return 0
}

func collect(t *testing.T, seq func(func(*record.Entry, error) bool)) []record.Entry {
	t.Helper()
	var out []record.Entry
	for e, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		c := *e
		c.Key, c.Value = slices.Clone(e.Key), slices.Clone(e.Value)
		out = append(out, c)
	}
	return out
}

// writeImage publishes the entries of v as an image in fsys and opens it.
func writeImage(t *testing.T, fsys vfs.FS, name string, v *Map) *image.Reader {
	t.Helper()
	meta := snapshot.Meta{Covered: 1, Revision: v.Revision()}
	if err := image.WriteAll(fsys, "/", name, meta, nil, v.All(nil, nil), image.Options{Seed: 9}); err != nil {
		t.Fatal(err)
	}
	r, err := image.Open(fsys, "/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func randomRecord(rng *rand.Rand, rev record.Revision, keys int) *record.Record {
	r := &record.Record{Revision: rev}
	for range 1 + rng.IntN(3) {
		k := []byte("k" + strconv.Itoa(rng.IntN(keys)))
		switch rng.IntN(5) {
		case 0, 1:
			r.Ops = append(r.Ops, record.Op{Kind: record.KindPut, Key: k, Value: []byte(fmt.Sprintf("v%d", rng.IntN(1000)))})
		case 2:
			r.Ops = append(r.Ops, record.Op{Kind: record.KindDelete, Key: k})
		default:
			r.Ops = append(r.Ops, record.Op{Kind: record.KindAdd, Key: k, Delta: int64(rng.IntN(7) - 3)})
		}
	}
	return r
}

// TestModel applies random records to a layered map and to a plain map,
// with checkpoints (Freeze, an image of the view, Swap) and views taken
// along the way, and compares every read: Lookup, Len, All over ranges,
// and each view against the state it was taken at.
func TestModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(strconv.Itoa(int(seed)), func(t *testing.T) {
			// A merge takes the changes a few at a time in most runs, so
			// that its steps end at every kind of place.
			defer func(n int) { topStep = n }(topStep)
			if seed%4 != 0 {
				topStep = int(seed%4*3 - 2)
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			fsys := vfs.NewMem()
			md := &model{m: map[string]record.Entry{}}
			m := New(record.NewMap(), nil)
			keys := 5 + rng.IntN(200)
			type view struct {
				v    *Map
				want []record.Entry
			}
			var views []view
			var frozen *Map
			images := 0
			for rev := record.Revision(1); rev <= 600; rev++ {
				r := randomRecord(rng, rev, keys)
				if op := &r.Ops[0]; len(r.Ops) == 1 && op.Kind != record.KindAdd && rng.IntN(2) == 0 {
					// The committer's way: the entry made from the
					// state it read, and whether the key existed.
					old, had := md.m[string(op.Key)]
					var prev *record.Entry
					if had {
						prev = &old
					}
					e, err := record.Next(prev, op, rev)
					if err != nil {
						t.Fatal(err)
					}
					if e == nil {
						err = m.DeleteLater(op.Key, had)
					} else {
						err = m.LoadLater(e, had)
					}
					if err != nil {
						t.Fatal(err)
					}
					m.SetRevision(rev)
					if err := md.apply(r); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(4) == 0 {
						m.FlushSome(rng.IntN(8))
					}
				} else {
					werr := md.apply(r)
					gerr := m.Apply(r)
					if (werr == nil) != (gerr == nil) {
						t.Fatalf("rev %d: apply %v, model %v", rev, gerr, werr)
					}
					if werr != nil {
						md.rev = rev
						m.SetRevision(rev) // a record refused is skipped by both
					}
				}
				switch rng.IntN(40) {
				case 0:
					if frozen == nil {
						var err error
						if frozen, err = m.Freeze(); err != nil {
							t.Fatal(err)
						}
						views = append(views, view{frozen, md.sorted()})
					}
				case 1:
					if frozen != nil {
						images++
						img := writeImage(t, fsys, "img"+strconv.Itoa(images), frozen)
						if err := m.Swap(img); err != nil {
							t.Fatal(err)
						}
						frozen = nil
					}
				case 2:
					v, err := m.Clone()
					if err != nil {
						t.Fatal(err)
					}
					views = append(views, view{v, md.sorted()})
				}
				if rev%50 == 0 || rev == 600 {
					check(t, m, md)
				}
			}
			t.Logf("%d images", images)
			if images == 0 {
				t.Log("no image swapped in")
			}
			for i, v := range views {
				if d := cmp.Diff(v.want, collect(t, v.v.All(nil, nil))); d != "" {
					t.Fatalf("view %d changed (-want +got):\n%s", i, d)
				}
				if v.v.Len() != len(v.want) {
					t.Fatalf("view %d: Len %d, want %d", i, v.v.Len(), len(v.want))
				}
				if err := v.v.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func check(t *testing.T, m *Map, md *model) {
	t.Helper()
	if m.Revision() != md.rev {
		t.Fatalf("revision %d, want %d", m.Revision(), md.rev)
	}
	want := md.sorted()
	if m.Len() != len(want) {
		t.Fatalf("Len %d, want %d (changes %d)", m.Len(), len(want), m.ChangedLen())
	}
	if d := cmp.Diff(want, collect(t, m.All(nil, nil))); d != "" {
		t.Fatalf("All (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, collect(t, m.AllStable(nil, nil))); d != "" {
		t.Fatalf("AllStable (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, collect(t, m.AllOnce(nil, nil))); d != "" {
		t.Fatalf("AllOnce (-want +got):\n%s", d)
	}
	start, end := []byte("k2"), []byte("k5")
	var sub []record.Entry
	for _, e := range want {
		if string(e.Key) >= string(start) && string(e.Key) < string(end) {
			sub = append(sub, e)
		}
	}
	if d := cmp.Diff(sub, collect(t, m.All(start, end))); d != "" {
		t.Fatalf("All(k2, k5) (-want +got):\n%s", d)
	}
	for i := range 250 {
		k := "k" + strconv.Itoa(i)
		e, ok, err := m.Lookup([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		w, wok := md.m[k]
		if ok != wok || ok && !cmp.Equal(w, e) {
			t.Fatalf("Lookup %s: %v %+v, want %v %+v", k, ok, e, wok, w)
		}
	}
}

// TestSwapRefusesAnotherRevision checks Swap's guard: an image that is
// not the frozen view's leaves the map as it was.
func TestSwapRefusesAnotherRevision(t *testing.T) {
	fsys := vfs.NewMem()
	m := New(record.NewMap(), nil)
	put := func(rev record.Revision, k string) {
		if err := m.Apply(&record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindPut, Key: []byte(k), Value: []byte("v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "a")
	img := writeImage(t, fsys, "x", m)
	if err := m.Swap(img); !errors.Is(err, ErrSwap) {
		t.Fatalf("Swap with nothing frozen: %v", err)
	}
	v, err := m.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	put(2, "b")
	img2 := writeImage(t, fsys, "y", m) // revision 2, the view is at 1
	if err := m.Swap(img2); !errors.Is(err, ErrSwap) {
		t.Fatalf("Swap of an image at another revision: %v", err)
	}
	if err := m.Swap(writeImage(t, fsys, "z", v)); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 2 || m.ChangedLen() != 1 {
		t.Fatalf("after Swap: Len %d, changes %d; want 2 and 1 (b, written after the freeze)", m.Len(), m.ChangedLen())
	}
	img.Close()
	img2.Close()
}
