package kv

import (
	"math"
	"sync/atomic"
	"time"
)

// Histogram is a distribution of observations: how many fell at or
// below each bucket's upper bound and above the previous one's. Bounds
// double from one bucket to the next, so a histogram is small and its
// quantiles are good to a factor of two, which is what a latency's
// order of magnitude needs.
//
// A Histogram is a copy: Stats takes one of the store's live
// histograms, which later observations do not change.
type Histogram struct {
	Count   int64    // observations
	Sum     float64  // their sum, in the histogram's unit
	Buckets []Bucket // ascending upper bounds; the last is +Inf
}

// Bucket is one bucket of a Histogram.
type Bucket struct {
	UpperBound float64 // inclusive; math.Inf(1) for the last bucket
	Count      int64   // observations in (previous UpperBound, UpperBound]
}

// Mean returns Sum/Count, or 0 for an empty histogram.
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// Quantile returns the upper bound of the bucket that holds the q-th
// quantile (0 < q <= 1) of the observations: a value at least as large
// as that quantile and less than twice it, unless it falls in the last
// bucket, whose bound is +Inf. It returns 0 for an empty histogram.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.Count)))
	if rank < 1 {
		rank = 1
	}
	var n int64
	for _, b := range h.Buckets {
		n += b.Count
		if n >= rank {
			return b.UpperBound
		}
	}
	return math.Inf(1)
}

// histogram is the live form of a Histogram: atomic counters that the
// committer adds to and Stats reads from any goroutine. Bucket i holds
// observations in (first·2^(i-1), first·2^i]; bucket 0 everything at or
// below first; the last everything above the one before it.
type histogram struct {
	first   float64
	buckets []atomic.Int64
	count   atomic.Int64
	sumBits atomic.Uint64 // float64 bits; only the committer adds
}

func newHistogram(first float64, n int) *histogram {
	return &histogram{first: first, buckets: make([]atomic.Int64, n)}
}

// observe adds v. Only one goroutine at a time may call it (the sum is
// a read-modify-write), which the committer is.
func (h *histogram) observe(v float64) {
	i := 0
	for b := h.first; v > b && i < len(h.buckets)-1; b *= 2 {
		i++
	}
	h.buckets[i].Add(1)
	h.count.Add(1)
	h.sumBits.Store(math.Float64bits(math.Float64frombits(h.sumBits.Load()) + v))
}

func (h *histogram) observeDuration(d time.Duration) { h.observe(d.Seconds()) }

// snapshot copies the histogram. Counts read one at a time may be from
// slightly different moments; Count is the sum of the buckets read, so
// that the copy is consistent with itself.
func (h *histogram) snapshot() Histogram {
	out := Histogram{Buckets: make([]Bucket, len(h.buckets))}
	b := h.first
	for i := range h.buckets {
		ub := b
		if i == len(h.buckets)-1 {
			ub = math.Inf(1)
		}
		c := h.buckets[i].Load()
		out.Buckets[i] = Bucket{UpperBound: ub, Count: c}
		out.Count += c
		b *= 2
	}
	out.Sum = math.Float64frombits(h.sumBits.Load())
	return out
}

// The histograms' shapes. Latencies run from 1 µs to about 17 min
// (31 buckets); group sizes from 1 to 65,536 records and over.
const (
	latencyFirst   = 1e-6
	latencyBuckets = 31
	groupBuckets   = 18
)

// metrics are the store's histograms and the checkpoint bytes, beside
// the counters of statCounters.
type metrics struct {
	syncLatency     *histogram // seconds per log fdatasync of a commit or a Sync
	groupSize       *histogram // records per group commit
	checkpointTime  *histogram // seconds per checkpoint that succeeded
	checkpointBytes atomic.Int64
	lastCheckpoint  atomic.Int64 // bytes of the newest snapshot written
}

func newMetrics() *metrics {
	return &metrics{
		syncLatency:    newHistogram(latencyFirst, latencyBuckets),
		groupSize:      newHistogram(1, groupBuckets),
		checkpointTime: newHistogram(latencyFirst, latencyBuckets),
	}
}
