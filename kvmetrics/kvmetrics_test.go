package kvmetrics_test

import (
	"encoding/json"
	"expvar"
	"os/exec"
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvmetrics"
)

func openStore(t *testing.T) *kv.Store {
	t.Helper()
	s, err := kv.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestVar: the expvar value is JSON holding what Stats says, histograms
// included, and two stores publish side by side under names the program
// picks.
func TestVar(t *testing.T) {
	a, b := openStore(t), openStore(t)
	for _, k := range []string{"x", "y", "z"} {
		if _, err := a.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	expvar.Publish("kvmetrics_test_a", kvmetrics.Var(a.Stats))
	expvar.Publish("kvmetrics_test_b", kvmetrics.Var(b.Stats))
	var got struct {
		Records float64 `json:"records_total"`
		Keys    float64 `json:"keys"`
		Sync    struct {
			Count   int64            `json:"count"`
			Buckets map[string]int64 `json:"buckets"`
		} `json:"sync_seconds"`
	}
	if err := json.Unmarshal([]byte(expvar.Get("kvmetrics_test_a").String()), &got); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	var inBuckets int64
	for _, n := range got.Sync.Buckets {
		inBuckets += n
	}
	if got.Records != 3 || got.Keys != 3 || got.Sync.Count != st.SyncLatency.Count || got.Sync.Count == 0 ||
		inBuckets != got.Sync.Count || len(got.Sync.Buckets) != len(st.SyncLatency.Buckets) {
		t.Errorf("store a: %+v; Stats: %d records, %d syncs timed", got, st.Records, st.SyncLatency.Count)
	}
	if _, ok := got.Sync.Buckets["+Inf"]; !ok {
		t.Errorf("no +Inf bucket in %v", got.Sync.Buckets)
	}
	if s := expvar.Get("kvmetrics_test_b").String(); !strings.Contains(s, `"records_total":0`) {
		t.Errorf("store b: %s", s)
	}
}

// TestMetricsNames: every Stats field a monitor needs has a metric, and
// names are unique, snake case, with a unit suffix for counters.
func TestMetricsNames(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range kvmetrics.Metrics(kv.Stats{}) {
		if seen[m.Name] {
			t.Errorf("%s twice", m.Name)
		}
		seen[m.Name] = true
		if strings.ToLower(m.Name) != m.Name || strings.ContainsAny(m.Name, " -.") || m.Help == "" {
			t.Errorf("%q: not a snake case name with help", m.Name)
		}
		if m.Kind == kvmetrics.Counter && !strings.HasSuffix(m.Name, "_total") {
			t.Errorf("counter %s does not end in _total", m.Name)
		}
		if (m.Kind == kvmetrics.Histogram) != (m.Histogram != nil) {
			t.Errorf("%s: kind %d with histogram %v", m.Name, m.Kind, m.Histogram)
		}
	}
	for _, n := range []string{"sync_seconds", "group_records", "checkpoint_seconds", "checkpoint_bytes_total", "watch_lag_revisions"} {
		if !seen[n] {
			t.Errorf("no metric %s", n)
		}
	}
}

// TestNoGlobalRegistration: the package does not import expvar (whose
// init registers /debug/vars on http.DefaultServeMux) nor net/http.
func TestNoGlobalRegistration(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "expvar" || p == "net/http" {
			t.Errorf("kvmetrics depends on %s", p)
		}
	}
}
