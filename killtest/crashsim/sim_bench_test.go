package crashsim

import (
	"testing"
	"time"
)

// BenchmarkCheck checks a writes workload of about 1,000 events under all
// models with nested recovery, and reports the states checked per second.
func BenchmarkCheck(b *testing.B) {
	ws, err := Workloads(230, 1)
	if err != nil {
		b.Fatal(err)
	}
	w := ws[2] // writes
	for b.Loop() {
		start := time.Now()
		rep, err := Check(w, Config{Models: Models(), Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Ok() {
			b.Fatal("bad states")
		}
		states := rep.Nested.States
		for _, m := range rep.Models {
			states += m.States
		}
		b.ReportMetric(float64(rep.Events), "events")
		b.ReportMetric(float64(states), "states")
		b.ReportMetric(float64(states)/time.Since(start).Seconds(), "states/s")
		b.ReportMetric(float64(rep.Recoveries), "recoveries")
	}
}
