package kv

import (
	"math"
	"testing"
)

// TestHistogram: observations land in the bucket their bound names,
// and quantiles come back as bucket bounds.
func TestHistogram(t *testing.T) {
	h := newHistogram(1, 5) // (-inf,1] (1,2] (2,4] (4,8] (8,+inf)
	for _, v := range []float64{0.5, 1, 1.5, 3, 3, 4, 100} {
		h.observe(v)
	}
	got := h.snapshot()
	want := []int64{2, 1, 3, 0, 1}
	for i, b := range got.Buckets {
		if b.Count != want[i] {
			t.Errorf("bucket %d (<= %v): %d, want %d", i, b.UpperBound, b.Count, want[i])
		}
	}
	if !math.IsInf(got.Buckets[4].UpperBound, 1) || got.Buckets[3].UpperBound != 8 {
		t.Errorf("bounds: %+v", got.Buckets)
	}
	if got.Count != 7 || got.Sum != 113 {
		t.Errorf("count %d sum %v, want 7 and 113", got.Count, got.Sum)
	}
	for _, c := range []struct{ q, want float64 }{{0.1, 1}, {0.5, 4}, {0.85, 4}, {0.86, math.Inf(1)}, {1, math.Inf(1)}} {
		if q := got.Quantile(c.q); q != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, q, c.want)
		}
	}
	if (Histogram{}).Quantile(0.5) != 0 || (Histogram{}).Mean() != 0 {
		t.Error("an empty histogram's quantile or mean is not 0")
	}
}
