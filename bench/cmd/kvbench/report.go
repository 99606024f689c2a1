package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
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

// rounds returns the rounds in which metric was measured for engine.
func (r results) rounds(engine, metric string) []int {
	var rs []int
	for k := range r[engine][metric] {
		rs = append(rs, k)
	}
	slices.Sort(rs)
	return rs
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
)

func (u unit) format(v float64) string {
	switch u {
	case perSec:
		return fmtCount(v)
	case seconds:
		return fmtDur(v)
	case bytesMiB:
		return fmtMiB(v)
	case perKey:
		return fmt.Sprintf("%.0f B", v)
	case mbPerSec:
		return fmt.Sprintf("%.0f MB/s", v)
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

// row is one line of the table.
type row struct {
	metric string
	label  string
	unit   unit
	higher bool   // higher is better
	raw    string // raw's metric to divide by; "" for none
	peers  bool   // a ratio against the best peer makes sense
}

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
	keys := fmtKeys(c.Keys)
	replay := fmt.Sprintf("%d MiB", c.ReplayBytes>>20)
	rs = append(rs,
		row{"load.s", fmt.Sprintf("bulk load, %s keys in batches of %d, then close", keys, c.Batch), seconds, false, "load.s", true},
		row{"load.rss", "peak RSS of the load process", bytesMiB, false, "", true},
		row{"load.rsskey", "peak RSS of the load per key", perKey, false, "", true},
		row{"reopen.s", "reopen after the bulk load (page cache dropped)", seconds, false, "", true},
		row{"reopen.mbs", "reopen after the bulk load: bytes on disk ÷ time", mbPerSec, true, "readbw.cold", true},
		row{"reopen.first.s", "reopen after the bulk load, until a first ordered read", seconds, false, "", true},
		row{"reopen.rss", "peak RSS of reopen + gets + scan", bytesMiB, false, "", true},
		row{"get1.ops", fmt.Sprintf("random Get on %s keys, 1 goroutine", keys), perSec, true, "", true},
		row{"get2.ops", fmt.Sprintf("random Get on %s keys, 2 goroutines", keys), perSec, true, "", true},
		row{"scan.s", fmt.Sprintf("full ordered scan of %s keys", keys), seconds, false, "", true},
		row{"mixed.ops", "mixed 50/40/10 get/put/add, 16 workers: ops/s", perSec, true, "", true},
		row{"mixed.p50", "mixed: p50", seconds, false, "", true},
		row{"mixed.p99", "mixed: p99", seconds, false, "", true},
		row{"replay.s", fmt.Sprintf("reopen after %s of small writes (page cache dropped)", replay), seconds, false, "", true},
		row{"replay.mbs", fmt.Sprintf("reopen after %s of small writes: %s ÷ time", replay, replay), mbPerSec, true, "readbw.cold", true},
		row{"replay.first.s", fmt.Sprintf("reopen after %s of small writes, until a first ordered read", replay), seconds, false, "", true},
		row{"replay.bytes", "bytes on disk at that reopen", bytesMiB, false, "", false},
		row{"replay.rss", "peak RSS of that reopen", bytesMiB, false, "", true},
		row{"readbw.cold", fmt.Sprintf("sequential read of a %s file, page cache dropped", replay), mbPerSec, true, "", false},
		row{"readbw.hot", fmt.Sprintf("sequential read of a %s file, from the page cache", replay), mbPerSec, true, "", false},
		row{"memtouch", fmt.Sprintf("first write to each page of %s of memory new to the process", replay), mbPerSec, true, "", false},
	)
	return rs
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

// better reports whether a beats b for a row.
func (rw row) better(a, b float64) bool {
	if rw.higher {
		return a > b
	}
	return a < b
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

// bestPeer returns the best peer's figure for rw in a round, and which.
func (r results) bestPeer(rw row, metric string, round int, engines []string) (float64, string, bool) {
	var best float64
	var who string
	for _, p := range peers {
		if !slices.Contains(engines, p) {
			continue
		}
		v, ok := r.get(p, metric, round)
		if !ok {
			continue
		}
		if who == "" || rw.better(v, best) {
			best, who = v, p
		}
	}
	return best, who, who != ""
}

// report writes the markdown table and the targets against the peers.
func report(w io.Writer, c config, engines []string, res results) {
	nr := max(c.Rounds, c.ReplayRounds)
	fmt.Fprintf(w, "%s keys of %d bytes with %d-byte values; batches of %d; %d MiB replay (%d puts of %d log bytes); %d rounds (%d of replay); puts %v, gets %v, mixed %v per run.\n",
		fmtKeys(c.Keys), keySize, valueSize, c.Batch, c.ReplayBytes>>20, replayWrites(c), kvLogBytesPerPut(), c.Rounds, c.ReplayRounds, c.PutDur, c.ReadDur, c.MixedDur)
	fmt.Fprintf(w, "Cells: median (min–max) over rounds. Ratios: kv ÷ the best peer of the same round (the best by the row's direction), and kv ÷ raw of the same round; median (min–max) of the per-round ratios.\n\n")
	fmt.Fprintf(w, "| workload |")
	for _, e := range engines {
		fmt.Fprintf(w, " %s |", e)
	}
	hasKV := slices.Contains(engines, "kv")
	if hasKV {
		fmt.Fprintf(w, " kv ÷ best peer | kv ÷ raw |")
	}
	fmt.Fprintf(w, "\n|---|")
	for range engines {
		fmt.Fprintf(w, "---|")
	}
	if hasKV {
		fmt.Fprintf(w, "---|---|")
	}
	fmt.Fprintln(w)
	for _, rw := range rows(c) {
		any := false
		for _, e := range engines {
			if len(res.values(e, rw.metric)) > 0 {
				any = true
			}
		}
		if !any {
			continue
		}
		arrow := "↓"
		if rw.higher {
			arrow = "↑"
		}
		if !rw.peers && rw.raw == "" {
			arrow = ""
		}
		fmt.Fprintf(w, "| %s |", strings.TrimSpace(rw.label+" "+arrow))
		for _, e := range engines {
			fmt.Fprintf(w, " %s |", fmtSpread(spreadOf(res.values(e, rw.metric)), rw.unit))
		}
		if hasKV {
			peer, raw := "", ""
			if rw.peers {
				peer = fmtRatio(spreadOf(ratioRounds(func(k int) (float64, bool) {
					v, ok := res.get("kv", rw.metric, k)
					b, _, okb := res.bestPeer(rw, rw.metric, k, engines)
					return v / b, ok && okb
				}, nr)))
			}
			if rw.raw != "" {
				raw = fmtRatio(spreadOf(ratioRounds(func(k int) (float64, bool) {
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
			fmt.Fprintf(w, " %s | %s |", orNA(peer), orNA(raw))
		}
		fmt.Fprintln(w)
	}
	if hasKV {
		targets(w, c, engines, res)
	}
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

// targets writes the targets against the peers as ratios from this run.
func targets(w io.Writer, c config, engines []string, res results) {
	nr := max(c.Rounds, c.ReplayRounds)
	last := c.Writers[len(c.Writers)-1]
	pw := fmt.Sprintf("put%d.", last)
	type target struct {
		what   string
		goal   string
		ok     func(float64) bool
		ratio  func(k int) (float64, bool)
		absolt bool
	}
	kvv := func(m string, k int) (float64, bool) { return res.get("kv", m, k) }
	peerOf := func(m string, higher bool) func(k int) (float64, bool) {
		return func(k int) (float64, bool) {
			v, ok := kvv(m, k)
			b, _, okb := res.bestPeer(row{higher: higher}, m, k, engines)
			return v / b, ok && okb
		}
	}
	vs := func(m, e, m2 string) func(k int) (float64, bool) {
		return func(k int) (float64, bool) {
			v, ok := kvv(m, k)
			b, okb := res.get(e, m2, k)
			if !okb && m2 == "readbw.cold" {
				s := spreadOf(res.values("raw", m2))
				b, okb = s.med, s.n > 0
			}
			return v / b, ok && okb
		}
	}
	rssLimit := 2*rawPerKey + 64.0
	ts := []target{
		{fmt.Sprintf("durable puts, %d writers: kv ÷ best peer", last), "≥ 1.5×", func(v float64) bool { return v >= 1.5 }, peerOf(pw+"ops", true), false},
		{fmt.Sprintf("durable puts, %d writers: kv ÷ (raw 1-writer ops/s × kv's average group)", last), "≥ 0.5× (within 2×)", func(v float64) bool { return v >= 0.5 },
			func(k int) (float64, bool) {
				v, ok := kvv(pw+"ops", k)
				g, okg := kvv(pw+"group", k)
				r1, okr := res.get("raw", "put1.ops", k)
				return v / (r1 * g), ok && okg && okr
			}, false},
		{"durable puts, 1 writer: kv p50 ÷ raw append+fdatasync p50", "≤ 1.0×", func(v float64) bool { return v <= 1.0 }, vs("put1.p50", "raw", "put1.p50"), false},
		{"random Get, 1 goroutine: kv ÷ best peer", "≥ 3×", func(v float64) bool { return v >= 3 }, peerOf("get1.ops", true), false},
		{"random Get, 2 goroutines: kv ÷ best peer", "≥ 3×", func(v float64) bool { return v >= 3 }, peerOf("get2.ops", true), false},
		{"reopen after the bulk load: kv time ÷ pebble time", "< 1×", func(v float64) bool { return v < 1 }, vs("reopen.s", "pebble", "reopen.s"), false},
		{"reopen after the bulk load: kv bytes/s ÷ raw cold read", "≥ 0.5×", func(v float64) bool { return v >= 0.5 }, vs("reopen.mbs", "raw", "readbw.cold"), false},
		{fmt.Sprintf("reopen after %d MiB of log: kv time ÷ pebble time", c.ReplayBytes>>20), "< 1×", func(v float64) bool { return v < 1 }, vs("replay.s", "pebble", "replay.s"), false},
		{fmt.Sprintf("reopen after %d MiB of log: kv MB/s ÷ raw cold read", c.ReplayBytes>>20), "≥ 0.5×", func(v float64) bool { return v >= 0.5 }, vs("replay.mbs", "raw", "readbw.cold"), false},
		{"peak RSS of the bulk load, per key (B)", fmt.Sprintf("≤ 2×%d+64 = %.0f", rawPerKey, rssLimit), func(v float64) bool { return v <= rssLimit },
			func(k int) (float64, bool) { return kvv("load.rsskey", k) }, true},
		{"peak RSS of the reopen + gets + scan, per key (B)", fmt.Sprintf("≤ %.0f", rssLimit), func(v float64) bool { return v <= rssLimit },
			func(k int) (float64, bool) {
				v, ok := kvv("reopen.rss", k)
				return v / float64(c.Keys), ok
			}, true},
	}
	fmt.Fprintf(w, "\nThe targets against the peers, as per-round ratios of this run (median (min–max)):\n\n")
	fmt.Fprintf(w, "| target | this run | goal | |\n|---|---|---|---|\n")
	for _, t := range ts {
		s := spreadOf(ratioRounds(t.ratio, nr))
		if s.n == 0 {
			continue
		}
		got := fmtRatio(s)
		if t.absolt {
			got = fmtSpread(s, perKey)
		}
		verdict := "missed"
		if t.ok(s.med) {
			verdict = "met"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.what, got, t.goal, verdict)
	}
}
