package kvprom_test

import (
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollector: two stores on one registry, told apart by a label; the
// values are the stores' Stats; the default registry gets nothing; the
// metrics pass Prometheus's lint.
func TestCollector(t *testing.T) {
	open := func() *kv.Store {
		s, err := kv.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	for _, k := range []string{"x", "y", "z"} {
		if _, err := a.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	ca := kvprom.NewCollector(a.Stats, prometheus.Labels{"store": "a"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(ca, kvprom.NewCollector(b.Stats, prometheus.Labels{"store": "b"}))

	st := a.Stats()
	want := `
# HELP kv_records_total Records committed to the log since open.
# TYPE kv_records_total counter
kv_records_total{store="a"} 3
kv_records_total{store="b"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kv_records_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "kv_sync_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() != "a" {
				continue
			}
			found = true
			h := m.GetHistogram()
			if int64(h.GetSampleCount()) != st.SyncLatency.Count || h.GetSampleCount() == 0 {
				t.Errorf("kv_sync_seconds count %d, Stats %d", h.GetSampleCount(), st.SyncLatency.Count)
			}
			bs := h.GetBucket()
			if last := bs[len(bs)-1].GetCumulativeCount(); last > h.GetSampleCount() {
				t.Errorf("cumulative count %d past the sample count %d", last, h.GetSampleCount())
			}
			for i := 1; i < len(bs); i++ {
				if bs[i].GetCumulativeCount() < bs[i-1].GetCumulativeCount() {
					t.Errorf("buckets not cumulative at %v", bs[i].GetUpperBound())
				}
			}
		}
	}
	if !found {
		t.Error("no kv_sync_seconds for store a")
	}
	problems, err := testutil.CollectAndLint(ca)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	def, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range def {
		if strings.HasPrefix(mf.GetName(), "kv_") {
			t.Errorf("%s on the default registry", mf.GetName())
		}
	}
}
