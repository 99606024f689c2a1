package kv

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestEventRing runs pushes, drops and searches against a slice, across
// the ring's wraps, growths and shrinks.
func TestEventRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r eventRing
	var model []Revision
	next := Revision(1)
	grew, shrank := false, false
	for step := range 200000 {
		// Phases of growth and of shrinking, so that the ring both
		// doubles and halves.
		pushing := (step/20000)%2 == 0
		size := len(r.buf)
		switch op := rng.IntN(10); {
		case op < 6 == pushing:
			for range rng.IntN(8) {
				r.push(histEvent{entry: Entry{ModRev: next}})
				model = append(model, next)
				next++
			}
		default:
			k := rng.IntN(min(len(model), 8) + 1)
			r.drop(k)
			model = model[k:]
		}
		grew = grew || len(r.buf) > size && size > 0
		shrank = shrank || len(r.buf) < size
		if r.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, r.len(), len(model))
		}
		if len(model) > 0 {
			for _, i := range []int{0, len(model) - 1, rng.IntN(len(model))} {
				if got := r.at(i).entry.ModRev; got != model[i] {
					t.Fatalf("step %d: event %d has revision %d, want %d", step, i, got, model[i])
				}
			}
		}
		from := next - Revision(rng.IntN(20))
		want := sort.Search(len(model), func(i int) bool { return model[i] >= from })
		if got := r.search(func(ev *histEvent) bool { return ev.entry.ModRev >= from }); got != want {
			t.Fatalf("step %d: search from %d = %d, want %d", step, from, got, want)
		}
	}
	if !grew || !shrank {
		t.Fatalf("the ring never grew (%v) or never shrank (%v): the test missed a path", grew, shrank)
	}
	// A dropped event pins nothing.
	for i := range r.buf {
		if j := (i - r.head) & (len(r.buf) - 1); j >= r.n && r.buf[i].entry.ModRev != 0 {
			t.Fatalf("slot %d, outside the ring's %d events, still holds revision %d", i, r.n, r.buf[i].entry.ModRev)
		}
	}
}
