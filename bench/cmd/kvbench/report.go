package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/kvstore/kv/bench/internal/pagecache"
)

// results holds every figure: engine → metric → round → value.
type results map[string]map[string]map[int]float64

func (r results) add(engine, metric string, round int, v float64) {
	if r[engine] == nil {
		r[engine] = map[string]map[int]float64{}
	}
	if r[engine][metric] == nil {
		r[engine][metric] = map[int]float64{}
	}
	r[engine][metric][round] = v
}

// get returns a figure and whether it was measured.
func (r results) get(engine, metric string, round int) (float64, bool) {
	v, ok := r[engine][metric][round]
	return v, ok
}

// spread is the median, minimum and maximum of some values.
type spread struct {
	med, lo, hi float64
	n           int
}

func spreadOf(vs []float64) spread {
	if len(vs) == 0 {
		return spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med: m, lo: s[0], hi: s[len(s)-1], n: len(s)}
}

func (r results) values(engine, metric string) []float64 {
	var vs []float64
	for _, v := range r[engine][metric] {
		vs = append(vs, v)
	}
	return vs
}

// unit says how a figure prints.
type unit int

const (
	perSec   unit = iota // ops/s
	seconds              // a duration
	bytesMiB             // a size
	perKey               // bytes per key
	mbPerSec             // bandwidth
	times                // a plain factor
	fraction             // a ratio below 1, mostly
	count                // a number of things
)

func (u unit) format(v float64) string {
	switch u {
	case perSec, count:
		return fmtCount(v)
	case seconds:
		return fmtDur(v)
	case bytesMiB:
		return fmtMiB(v)
	case perKey:
		return fmt.Sprintf("%.0f B", v)
	case mbPerSec:
		return fmt.Sprintf("%.0f MB/s", v)
	case fraction:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtDur(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

func fmtMiB(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

func fmtSpread(s spread, u unit) string {
	if s.n == 0 {
		return "n/a"
	}
	if s.n == 1 || s.lo == s.hi {
		return u.format(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", u.format(s.med), u.format(s.lo), u.format(s.hi))
}

func fmtRatio(s spread) string {
	if s.n == 0 {
		return "n/a"
	}
	f := func(v float64) string {
		switch {
		case v >= 10:
			return fmt.Sprintf("%.0f×", v)
		case v >= 0.1:
			return fmt.Sprintf("%.2f×", v)
		}
		return fmt.Sprintf("%.2g×", v)
	}
	if s.n == 1 || s.lo == s.hi {
		return f(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.med), f(s.lo), f(s.hi))
}

// row is one line of the tables.
type row struct {
	metric string
	label  string
	unit   unit
	higher bool   // higher is better
	raw    string // raw's metric to divide by; "" for none
	peers  bool   // a ratio against each peer makes sense
}

// peers are the engines kv is compared with, in the order of the ratio
// columns.
var peers = []string{"pebble", "bbolt", "badger", "walmap"}

func rows(c config) []row {
	var rs []row
	for _, w := range c.Writers {
		p := fmt.Sprintf("put%d.", w)
		ws := writersName(w)
		rs = append(rs,
			row{p + "ops", fmt.Sprintf("durable puts, %s: ops/s", ws), perSec, true, p + "ops", true},
			row{p + "p50", fmt.Sprintf("durable puts, %s: p50", ws), seconds, false, p + "p50", true},
			row{p + "p99", fmt.Sprintf("durable puts, %s: p99", ws), seconds, false, p + "p99", true},
		)
	}
	if n := len(c.Writers); n > 0 {
		w := c.Writers[n-1]
		rs = append(rs, row{fmt.Sprintf("put%d.group", w), fmt.Sprintf("average group commit, %d writers", w), times, true, "", false})
	}
	if w := pairedWriters(c); w > 0 {
		rs = append(rs, row{fmt.Sprintf("put%d.limit", w),
			fmt.Sprintf("durable puts, %d writers, in 150 ms windows alternating with raw's: ops/s ÷ (%d ÷ raw's latency), median of the pairs", w, w),
			fraction, true, "", true})
	}
	keys := fmtKeys(c.Keys)
	replay := fmt.Sprintf("%d MiB", c.ReplayBytes>>20)
	rd := c.ReadDur
	rs = append(rs,
		row{"load.s", fmt.Sprintf("bulk load, %s keys in durable batches of %d, then close", keys, c.Batch), seconds, false, "load.s", true},
		row{"load.rss", "peak RSS: load, close", bytesMiB, false, "", true},
		row{"load.rsskey", "peak RSS per key: load, close", perKey, false, "", true},
		row{"loadreopen.rss", "peak RSS: load, close, reopen, in one process", bytesMiB, false, "", true},
		row{"loadreopen.rsskey", "peak RSS per key: load, close, reopen, in one process", perKey, false, "", true},
		row{"reopen.rss", "peak RSS: cold reopen and a first ordered read (reopen only)", bytesMiB, false, "", true},
		row{"reopen.rsskey", "peak RSS per key: cold reopen and a first ordered read (reopen only)", perKey, false, "", true},
		row{"warm.rss", "peak RSS: reopen, full scan, warm gets, scan", bytesMiB, false, "", true},
		row{"loadreopen.s", "first reopen after the bulk load, warm (in the loading process)", seconds, false, "", true},
		row{"reopen.s", "second reopen of the loaded store, cold", seconds, false, "", true},
		row{"reopen.mbs", "second reopen, cold: bytes on disk ÷ time", mbPerSec, true, "readbw.cold", true},
		row{"reopen.first.s", "second reopen, cold, until a first ordered read", seconds, false, "", true},
		row{"get1.cold.ops", fmt.Sprintf("random Get on %s keys, 1 goroutine, cold (first %v after a cold open)", keys, rd), perSec, true, "", true},
		row{"get1.warm.ops", fmt.Sprintf("random Get on %s keys, 1 goroutine, warm (after a full scan)", keys), perSec, true, "", true},
		row{"get2.cold.ops", fmt.Sprintf("random Get on %s keys, 2 goroutines, cold (first %v after a cold open)", keys, rd), perSec, true, "", true},
		row{"get2.warm.ops", fmt.Sprintf("random Get on %s keys, 2 goroutines, warm (after a full scan)", keys), perSec, true, "", true},
		row{"scan.cold.s", fmt.Sprintf("full ordered scan of %s keys, cold (after a cold open and a first ordered read)", keys), seconds, false, "", true},
		row{"scan.warm.s", fmt.Sprintf("full ordered scan of %s keys, warm (after a full scan)", keys), seconds, false, "", true},
		row{"mixed.ops", "mixed 50/40/10 get/put/add, 16 workers, warm: ops/s", perSec, true, "", true},
		row{"mixed.p50", "mixed, warm: p50", seconds, false, "", true},
		row{"mixed.p99", "mixed, warm: p99", seconds, false, "", true},
		row{"load.unsynced.kps", fmt.Sprintf("bulk load, %s keys in %d unsynced batches of %d, one sync at the end: keys/s", keys, (c.Keys+c.Batch-1)/c.Batch, c.Batch), perSec, true, "load.unsynced.kps", true},
		row{"afterload.rss", "peak RSS: unsynced load, close, reopen, two full ordered scans, in one process", bytesMiB, false, "", true},
		row{"afterload.rsskey", "peak RSS per key: unsynced load, close, reopen, two full ordered scans, in one process", perKey, false, "", true},
		row{"reopen.afterload.same.s", "reopen after the unsynced load and close, in the loading process", seconds, false, "", true},
		row{"scan.afterload.same.first.kps", "first full ordered scan right after that reopen: keys/s", perSec, true, "", true},
		row{"scan.afterload.same.second.kps", "second full ordered scan after that reopen: keys/s", perSec, true, "", true},
		row{"reopen.afterload.fresh.s", "reopen after the unsynced load and close, in a fresh process", seconds, false, "", true},
		row{"scan.afterload.fresh.first.kps", "first full ordered scan right after that reopen: keys/s", perSec, true, "", true},
		row{"killed.puts", "the log tail: unsynced puts since the last checkpoint (kv) or memtable rotation (pebble, badger; walmap and bbolt: as many as kv), then one sync and SIGKILL", count, false, "", false},
		row{"killed.logbytes", "kv's log bytes of those puts", bytesMiB, false, "", false},
		row{"reopen.killed.s", "reopen in a fresh process after the writer's SIGKILL with that log tail", seconds, false, "", true},
		row{"scan.killed.first.kps", "first full ordered scan right after that reopen: keys/s", perSec, true, "", true},
		row{"replay.s", fmt.Sprintf("reopen after %s of small writes, cold", replay), seconds, false, "", true},
		row{"replay.mbs", fmt.Sprintf("reopen after %s of small writes, cold: %s ÷ time", replay, replay), mbPerSec, true, "readbw.cold", true},
		row{"replay.first.s", fmt.Sprintf("reopen after %s of small writes, cold, until a first ordered read", replay), seconds, false, "", true},
		row{"replay.bytes", "bytes on disk at that reopen", bytesMiB, false, "", false},
		row{"replay.rss", "peak RSS: that reopen", bytesMiB, false, "", true},
		row{"readbw.cold", fmt.Sprintf("sequential read of a %s file, cold", replay), mbPerSec, true, "", false},
		row{"readbw.hot", fmt.Sprintf("sequential read of a %s file, from the page cache", replay), mbPerSec, true, "", false},
		row{"memtouch", fmt.Sprintf("first write to each page of %s of memory new to the process", replay), mbPerSec, true, "", false},
	)
	return rs
}

// pairedWriters is the writer count of the paired put workload
// (childPairedPuts): the last of -writers, when it is more than one;
// else 0, for none.
func pairedWriters(c config) int {
	if n := len(c.Writers); n > 0 && c.Writers[n-1] > 1 {
		return c.Writers[n-1]
	}
	return 0
}

func writersName(w int) string {
	if w == 1 {
		return "1 writer"
	}
	return fmt.Sprintf("%d writers", w)
}

func fmtKeys(n int) string {
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// ratioRounds returns f evaluated in every round where it has its inputs.
func ratioRounds(f func(round int) (float64, bool), rounds int) []float64 {
	var vs []float64
	for k := range rounds {
		if v, ok := f(k); ok && !math.IsInf(v, 0) && !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// label is a row's label with the arrow that says which way is better.
func (rw row) labelArrow() string {
	if !rw.peers && rw.raw == "" {
		return rw.label
	}
	if rw.higher {
		return rw.label + " ↑"
	}
	return rw.label + " ↓"
}

// report writes a results file: the run, the figures of every engine, and
// kv's per-round ratios to each peer and to raw.
func report(w io.Writer, s saved) {
	c, engines, res := s.Config, s.Engines, s.Results
	nr := max(c.Rounds, c.ReplayRounds)
	fmt.Fprintf(w, "# kvbench results\n\n%s", s.Run.Markdown())
	if s.Rendered != "" {
		fmt.Fprintf(w, "- rendered: from the run's JSON with `-report`, at commit %s (the figures are the run's; the labels and layout are this commit's)\n", s.Rendered)
	}
	fmt.Fprintf(w, "- cold: %s", pagecache.Label(c.Cold))
	if s.ColdNote != "" {
		fmt.Fprintf(w, " (%s)", s.ColdNote)
	}
	fmt.Fprintf(w, "\n- warm: in a process that opened the store and read every pair once in a full ordered scan before the figure\n")
	fmt.Fprintf(w, "- sizes: %s keys of %d bytes with %d-byte values; batches of %d; %d MiB replay (%d puts of %d log bytes); rounds: %d (%d of replay); puts %v, gets %v, mixed %v per run\n",
		fmtKeys(c.Keys), keySize, valueSize, c.Batch, c.ReplayBytes>>20, replayWrites(c), kvLogBytesPerPut(), c.Rounds, c.ReplayRounds, c.PutDur, c.ReadDur, c.MixedDur)
	if l := spreadOf(s.Load); l.n > 0 {
		fmt.Fprintf(w, "- load: the machine's 1-minute load average (`/proc/loadavg`) before each of the run's %d steps, which counts the run's own step before it too: median %.1f (%.1f–%.1f)\n",
			l.n, l.med, l.lo, l.hi)
	}
	fmt.Fprintf(w, "- engines, in the order of the first round (each round starts one engine later): %s\n", strings.Join(engines, " "))

	fmt.Fprintf(w, "\n## Figures\n\nMedian (min–max) over the rounds; ↑ higher is better, ↓ lower is better.\n\n")
	fmt.Fprintf(w, "| row | workload |")
	for _, e := range engines {
		fmt.Fprintf(w, " %s |", e)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(engines)))
	for _, rw := range rows(c) {
		if !res.measured(engines, rw.metric) {
			continue
		}
		fmt.Fprintf(w, "| %s | %s |", rw.metric, rw.labelArrow())
		for _, e := range engines {
			fmt.Fprintf(w, " %s |", fmtSpread(spreadOf(res.values(e, rw.metric)), rw.unit))
		}
		fmt.Fprintln(w)
	}
	if !slices.Contains(engines, "kv") {
		return
	}
	var cols []string
	for _, p := range peers {
		if slices.Contains(engines, p) {
			cols = append(cols, p)
		}
	}
	hasRaw := slices.Contains(engines, "raw")
	fmt.Fprintf(w, "\n## Ratios\n\nkv's figure ÷ the other engine's, in the same round; the median (min–max) of the per-round ratios. On a ↓ row below 1× is better for kv, on a ↑ row above 1×.\n\n")
	fmt.Fprintf(w, "| row | workload |")
	for _, p := range cols {
		fmt.Fprintf(w, " kv ÷ %s |", p)
	}
	if hasRaw {
		fmt.Fprintf(w, " kv ÷ raw |")
	}
	n := len(cols)
	if hasRaw {
		n++
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", n))
	for _, rw := range rows(c) {
		if !rw.peers && rw.raw == "" || !res.measured([]string{"kv"}, rw.metric) {
			continue
		}
		fmt.Fprintf(w, "| %s | %s |", rw.metric, rw.labelArrow())
		for _, p := range cols {
			cell := "n/a"
			if rw.peers {
				cell = fmtRatio(spreadOf(ratioRounds(func(k int) (float64, bool) {
					v, ok := res.get("kv", rw.metric, k)
					b, okb := res.get(p, rw.metric, k)
					return v / b, ok && okb
				}, nr)))
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		if hasRaw {
			cell := "n/a"
			if rw.raw != "" {
				cell = fmtRatio(spreadOf(ratioRounds(func(k int) (float64, bool) {
					v, ok := res.get("kv", rw.metric, k)
					b, okb := res.get("raw", rw.raw, k)
					if !okb && rw.raw == "readbw.cold" {
						// Replay rounds may be fewer: compare with the
						// median of the bandwidth measured.
						s := spreadOf(res.values("raw", rw.raw))
						b, okb = s.med, s.n > 0
					}
					return v / b, ok && okb
				}, nr)))
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
}

// measured reports whether any of engines has a figure for metric.
func (r results) measured(engines []string, metric string) bool {
	for _, e := range engines {
		if len(r.values(e, metric)) > 0 {
			return true
		}
	}
	return false
}
