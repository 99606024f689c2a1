package kvmetrics

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/kvstore/kv/kv"
)

// Kind is how a monitoring system should treat a metric.
type Kind int

// The kinds of metric.
const (
	Counter   Kind = iota // only grows while the store is open
	Gauge                 // goes up and down
	Histogram             // a distribution: Metric.Histogram
)

// Metric is one of a store's metrics, named as every adapter names it.
type Metric struct {
	// Name is in snake case with its unit as a suffix, as Prometheus
	// names go ("_total" for counters, "_seconds", "_bytes").
	Name      string
	Help      string
	Kind      Kind
	Value     float64       // for a Counter or a Gauge
	Histogram *kv.Histogram // for a Histogram
}

// Metrics returns st as metrics, always the same names in the same
// order.
func Metrics(st kv.Stats) []Metric {
	c := func(name, help string, v int64) Metric {
		return Metric{Name: name, Help: help, Kind: Counter, Value: float64(v)}
	}
	g := func(name, help string, v float64) Metric {
		return Metric{Name: name, Help: help, Kind: Gauge, Value: v}
	}
	h := func(name, help string, v kv.Histogram) Metric {
		return Metric{Name: name, Help: help, Kind: Histogram, Histogram: &v}
	}
	failed := 0.0
	if st.Failed != nil {
		failed = 1
	}
	return []Metric{
		c("records_total", "Records committed to the log since open.", st.Records),
		c("groups_total", "Group commits since open (one log write each).", st.Groups),
		c("syncs_total", "Log fdatasyncs for commits since open.", st.Syncs),
		c("logged_bytes_total", "Bytes appended to the log since open.", st.BytesLogged),
		c("checkpoints_total", "Snapshots written since open.", st.Checkpoints),
		c("checkpoint_errors_total", "Checkpoints that failed since open (the log is kept).", st.CheckpointErr),
		c("checkpoint_bytes_total", "Bytes of the snapshots written since open.", st.CheckpointBytes),
		c("watch_fell_behind_total", "Watches ended by ErrCompacted since open.", st.WatchFellBehind),
		c("lease_expiries_total", "Leases the store expired at their deadline since open.", st.LeaseExpiries),
		g("keys", "Keys in the map.", float64(st.Keys)),
		g("revision", "The last committed revision.", float64(st.Revision)),
		g("segment", "The log segment being appended to.", float64(st.Segment)),
		g("last_checkpoint_bytes", "Size of the newest snapshot written since open.", float64(st.LastCheckpointBytes)),
		g("watchers", "Watches running.", float64(st.Watchers)),
		g("watch_lag_revisions", "Durable revisions the slowest watcher has yet to read.", float64(st.WatchLag)),
		g("watch_history_bytes", "Bytes the watch history holds.", float64(st.HistoryBytes)),
		g("watch_history_oldest_revision", "The oldest revision a watch can start from.", float64(st.HistoryOldest)),
		g("leases", "Live leases.", float64(st.Leases)),
		g("lease_keys", "Keys bound to a live lease.", float64(st.LeaseKeys)),
		g("recovery_seconds", "How long the recovery at open took.", st.RecoveryTime.Seconds()),
		g("recovery_replayed_records", "Records the recovery at open replayed.", float64(st.RecoveryReplayed)),
		g("failed", "1 once the store has failed (a write or sync error), 0 before.", failed),
		h("sync_seconds", "Duration of each log fdatasync that succeeded.", st.SyncLatency),
		h("group_records", "Records per group commit.", st.GroupSizes),
		h("checkpoint_seconds", "Duration of each checkpoint that succeeded.", st.CheckpointTime),
	}
}

// Var returns an expvar.Var (any value with a String method that returns
// JSON) whose String reports stats() as a JSON object: each metric's
// name and value, and for a histogram an object with count, sum, p50,
// p99 and buckets keyed by upper bound ("+Inf" for the last). Publish it
// with expvar.Publish under a name of your own; this package publishes
// nothing.
func Var(stats func() kv.Stats) interface{ String() string } {
	return jsonVar(stats)
}

type jsonVar func() kv.Stats

func (v jsonVar) String() string {
	out := make(map[string]any)
	for _, m := range Metrics(v()) {
		if m.Kind != Histogram {
			out[m.Name] = m.Value
			continue
		}
		buckets := make(map[string]int64, len(m.Histogram.Buckets))
		for _, b := range m.Histogram.Buckets {
			buckets[bound(b.UpperBound)] = b.Count
		}
		out[m.Name] = map[string]any{
			"count":   m.Histogram.Count,
			"sum":     m.Histogram.Sum,
			"p50":     finite(m.Histogram.Quantile(0.5)),
			"p99":     finite(m.Histogram.Quantile(0.99)),
			"buckets": buckets,
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		// Every value is finite (finite, bound): unreachable.
		return strconv.Quote(err.Error())
	}
	return string(b)
}

func bound(ub float64) string {
	if math.IsInf(ub, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(ub, 'g', -1, 64)
}

// finite turns the +Inf of a quantile in the last bucket into the
// largest float64, which JSON can carry.
func finite(v float64) float64 {
	if math.IsInf(v, 1) {
		return math.MaxFloat64
	}
	return v
}
