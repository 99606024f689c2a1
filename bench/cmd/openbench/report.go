package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/kvstore/kv/bench/internal/pagecache"
	"github.com/kvstore/kv/bench/internal/units"
)

// rowDef is one row of the report.
type rowDef struct {
	id, what string
	format   func(float64) string
	engines  []string // the engines that have this figure (nil: all)
	// optional figures may be missing: the peak resident set of a
	// one-shot process is measured only where GNU time is installed.
	optional bool
	// goals are issue 20's goals for the row.
	goals []goal
}

// goal is one of issue 20's goals: met says whether a round meets it,
// from kv's figure and its ratios to bbolt and pebble.
type goal struct {
	text string
	met  func(kv, vsBolt, vsPebble float64) bool
}

func (r rowDef) has(e string) bool { return r.engines == nil || slices.Contains(r.engines, e) }

// rows are the report's rows, in its order. The arrow in what says
// which way is better.
var rows = []rowDef{
	{id: "reopen.warm.s", what: "reopen, warm: the open's time (new process, files in the page cache) ↓", format: units.Dur,
		goals: []goal{
			{"kv÷bbolt ≤ 2×", func(_, b, _ float64) bool { return b <= 2 }},
			{"kv÷pebble ≤ 0.05× (20 times pebble's speed)", func(_, _, p float64) bool { return p <= 0.05 }},
		}},
	{id: "reopen.warm.rss", what: "reopen, warm: resident set (VmRSS) after the open, this program's code and runtime included ↓", format: units.MiB,
		goals: []goal{{"kv < 30 MB", func(kv, _, _ float64) bool { return kv < 30e6 }}}},
	{id: "reopen.warm.rssadded", what: "reopen, warm: resident set added by the open (VmRSS after − before) ↓", format: units.MiB},
	{id: "reopen.warm.heap", what: "reopen, warm: Go heap in use after the open, after a GC ↓", format: units.MiB},
	{id: "heap.open.perkey", what: "Go heap in use after the open ÷ keys ↓", format: perKey},
	{id: "heap.steady.perkey", what: "Go heap in use after the open, random Gets and a full scan, after a GC, ÷ keys (no write since the checkpoint) ↓", format: perKey,
		goals: []goal{{"kv < 16 B/key", func(kv, _, _ float64) bool { return kv < 16 }}}},
	{id: "reopen.cold.s", what: "reopen, cold: the open's time ↓", format: units.Dur},
	{id: "reopen.cold.read", what: "reopen, cold: bytes the open read from the disk (/proc/self/io read_bytes, read-ahead included) ↓", format: units.MiB},
	{id: "cli.get.s", what: "one-shot command, warm: wall time of the process `kv DIR get KEY` / `bbolt get DB BUCKET KEY` ↓", format: units.Dur, engines: []string{"kv", "bbolt"},
		goals: []goal{{"kv÷bbolt ≤ 2×", func(_, b, _ float64) bool { return b <= 2 }}}},
	{id: "cli.get.maxrss", what: "one-shot command: the process's peak resident set (GNU time's %M, one run) ↓", format: units.MiB, engines: []string{"kv", "bbolt"}, optional: true},
	{id: "oneshot.get.s", what: "one-shot child of this program, warm: read-only open, one Get, close: wall time ↓", format: units.Dur},
	{id: "oneshot.get.maxrss", what: "one-shot child: the process's peak resident set (GNU time's %M, one run) ↓", format: units.MiB, optional: true},
	{id: "get.warm.first.s", what: "first Get after a warm open ↓", format: units.Dur},
	{id: "get.warm.ops", what: "random Gets on 1 goroutine, warm, in a process that just opened the store, each value copied into a buffer the caller reuses (kv: GetAppend; bbolt: in the transaction; pebble: before the closer): per second ↑", format: units.Ops,
		goals: []goal{{"kv÷bbolt ≥ 3×", func(_, b, _ float64) bool { return b >= 3 }}}},
	{id: "get.warm.owned.ops", what: "the same Gets through kv's Get, whose entries are the caller's to keep (a copy of its own each): per second ↑", format: units.Ops, engines: []string{"kv"}},
	{id: "get.cold.first.s", what: "first Get after a cold open ↓", format: units.Dur},
	{id: "get.cold.first.majflt", what: "first Get after a cold open: major page faults (pages of a mapping read from the disk) ↓", format: units.Count},
	{id: "get.cold.first.read", what: "first Get after a cold open: bytes read from the disk (read_bytes: reads and faults, read-ahead included) ↓", format: kib},
	{id: "get.cold.first.pages", what: "first Get after a cold open: pages read, the larger of the major faults and read bytes ÷ 4 KiB ↓", format: units.Count,
		goals: []goal{{"kv ≤ 2 pages", func(kv, _, _ float64) bool { return kv <= 2 }}}},
	{id: "scan.warm.kps", what: "full scan in key order, warm: keys per second (kv: Scan, whose entries stay valid: a copy of what it reads from the image) ↑", format: units.Ops,
		goals: []goal{{"kv÷pebble ≥ 1×", func(_, _, p float64) bool { return p >= 1 }}}},
	{id: "scanview.warm.kps", what: "the same scan again, kv through ScanView (entries valid until the next step, as the peers' iterators give theirs) ↑", format: units.Ops,
		goals: []goal{{"kv÷pebble ≥ 1×", func(_, _, p float64) bool { return p >= 1 }}}},
}

// figure returns engine e's figure of row id in round r, or NaN.
func figure(s saved, r int, e, id string) float64 {
	v, ok := s.Results[r][e][id]
	if !ok {
		return math.NaN()
	}
	return v
}

// spread formats the median and range of v, NaNs left out.
func spread(v []float64, format func(float64) string) string {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return "n/a"
	}
	slices.Sort(v)
	m := format(v[len(v)/2])
	if len(v) == 1 {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, format(v[0]), format(v[len(v)-1]))
}

// report writes the results file: the run's description, the figures
// (median and range over rounds) and kv's ratio to each peer per round.
func report(w io.Writer, s saved) {
	c := s.Config
	fmt.Fprintf(w, "# openbench results\n\n%s", s.Run.Markdown())
	if s.Rendered != "" {
		fmt.Fprintf(w, "- rendered: from the run's JSON with `-report`, at commit %s (the figures are the run's)\n", s.Rendered)
	}
	cold := pagecache.Label(c.Cold)
	if s.ColdNote != "" {
		cold += " (" + s.ColdNote + ")"
	}
	fmt.Fprintf(w, "- cold: %s\n", cold)
	fmt.Fprintf(w, "- warm: every file of the store, this program and the commands read once right before the step, so that the page cache holds them\n")
	fmt.Fprintf(w, "- kv command: %s\n", s.KVCLI)
	fmt.Fprintf(w, "- bbolt command: %s\n", s.BoltCLI)
	fmt.Fprintf(w, "- data set: %d keys of %d bytes with %d-byte values, loaded in durable batches of %d; kv then checkpointed, pebble flushed\n", c.Keys, keySize, valueSize, batch)
	fmt.Fprintf(w, "- files: kv %s, bbolt %s, pebble %s; built in kv %s, bbolt %s, pebble %s\n",
		units.MiB(float64(s.Sizes["kv"])), units.MiB(float64(s.Sizes["bbolt"])), units.MiB(float64(s.Sizes["pebble"])),
		units.Dur(s.Build["kv"]), units.Dur(s.Build["bbolt"]), units.Dur(s.Build["pebble"]))
	reopens := ""
	if c.ReopenRuns > 0 {
		reopens = fmt.Sprintf("; %d warm reopens per engine and round", c.ReopenRuns)
	}
	sliced := ""
	if c.GetSlices > 0 {
		sliced = fmt.Sprintf(" (in %d slices, the engines in turn)", c.GetSlices)
	}
	fmt.Fprintf(w, "- rounds: %d; random Gets %v%s after %v of warm-up; %d one-shot runs per process kind and round%s\n", c.Rounds, c.GetDur, sliced, c.GetDur/2, c.CLIRuns, reopens)
	if len(s.Load) > 0 {
		fmt.Fprintf(w, "- load: the machine's 1-minute load average before each step: %s on %d steps\n", spread(s.Load, func(x float64) string { return fmt.Sprintf("%.1f", x) }), len(s.Load))
	}

	perRound := fmt.Sprintf("A one-shot row's figure in a round is the median of its %d runs", c.CLIRuns)
	if c.ReopenRuns > 0 {
		perRound += fmt.Sprintf("; a warm reopen row's (reopen.warm, heap.open, get.warm.first), the median of its %d", c.ReopenRuns)
	}
	fmt.Fprintf(w, "\n## Figures\n\nMedian (min–max) over the rounds; ↑ higher is better, ↓ lower is better. %s.\n\n", perRound)
	fmt.Fprintf(w, "| row | what | %s |\n|---|---|%s\n", strings.Join(engines, " | "), strings.Repeat("---|", len(engines)))
	for _, row := range rows {
		fmt.Fprintf(w, "| %s | %s |", row.id, row.what)
		for _, e := range engines {
			if !row.has(e) {
				fmt.Fprint(w, " n/a |")
				continue
			}
			var v []float64
			for r := range s.Results {
				v = append(v, figure(s, r, e, row.id))
			}
			fmt.Fprintf(w, " %s |", spread(v, row.format))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "\n## Ratios\n\nkv's figure ÷ the peer's, in each round: median (min–max) over the rounds. A time or a size below 1× is kv doing better; a rate above 1×; 0÷0 counts as 1×. The goals are issue 20's; \"met\" counts the rounds that meet it.\n\n")
	fmt.Fprintln(w, "| row | kv÷bbolt | kv÷pebble | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, row := range rows {
		var vb, vp []float64
		met, n := make([]int, len(row.goals)), 0
		for r := range s.Results {
			kv := figure(s, r, "kv", row.id)
			b, p := div(kv, figure(s, r, "bbolt", row.id)), div(kv, figure(s, r, "pebble", row.id))
			if !row.has("bbolt") {
				b = math.NaN()
			}
			if !row.has("pebble") {
				p = math.NaN()
			}
			vb, vp = append(vb, b), append(vp, p)
			if math.IsNaN(kv) {
				continue
			}
			n++
			for i, g := range row.goals {
				if g.met(kv, b, p) {
					met[i]++
				}
			}
		}
		goal, metS := "—", "—"
		if len(row.goals) > 0 {
			var gs, ms []string
			for i, g := range row.goals {
				gs = append(gs, g.text)
				ms = append(ms, fmt.Sprintf("%d of %d", met[i], n))
			}
			goal, metS = strings.Join(gs, "; "), strings.Join(ms, "; ")
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.id, spread(vb, ratio), spread(vp, ratio), goal, metS)
	}
	fmt.Fprintln(w, "\nNotes:")
	fmt.Fprint(w, "\n- RSS and heap are the child process's: this program links kv, bbolt and pebble, whose code and runtime are in every resident set (`reopen.warm.rssadded` leaves them out). The one-shot child is this same program, so `oneshot.get.s` pays its start-up; ")
	if s.BoltChild {
		fmt.Fprintln(w, "`cli.get.s` is kv's own command, and for bbolt the one-shot child: bbolt's command could not be built.")
	} else {
		fmt.Fprintln(w, "`cli.get.s` is each store's own command.")
	}
	var bp []float64
	for r := range s.Results {
		bp = append(bp, div(figure(s, r, "bbolt", "reopen.warm.s"), figure(s, r, "pebble", "reopen.warm.s")))
	}
	fmt.Fprintf(w, "- For scale: bbolt's `reopen.warm.s` ÷ pebble's, in the same rounds, is %s, against the 0.05× that the goal of 20 times pebble's speed asks of kv.\n", spread(bp, ratio))
	var read []float64
	for r := range s.Results {
		read = append(read, figure(s, r, "kv", "reopen.cold.read"))
	}
	if rd := median(slices.DeleteFunc(read, math.IsNaN)); s.Sizes["kv"] > 0 && rd >= float64(s.Sizes["kv"])/2 {
		fmt.Fprintf(w, "- kv's cold open read %s of its %s of files (`reopen.cold.read`, median): its first Get after it had nothing left to read from the disk, so `get.cold.first.pages` says nothing yet of a Get served from the files.\n", units.MiB(rd), units.MiB(float64(s.Sizes["kv"])))
	}
}

// checkReport fails unless the report has every row in both tables, with
// a figure for every engine that has it and a ratio for every peer that
// has it.
func checkReport(text string) error {
	var errs []error
	lines := strings.Split(text, "\n")
	section := func(title string) []string {
		i := slices.Index(lines, "## "+title)
		if i < 0 {
			errs = append(errs, fmt.Errorf("the report has no section %q", title))
			return nil
		}
		out := lines[i+1:]
		if j := slices.IndexFunc(out, func(l string) bool { return strings.HasPrefix(l, "## ") }); j >= 0 {
			out = out[:j]
		}
		return out
	}
	find := func(sec []string, id string) []string {
		for _, l := range sec {
			if strings.HasPrefix(l, "| "+id+" |") {
				cells := strings.Split(strings.Trim(l, "|"), "|")
				for i := range cells {
					cells[i] = strings.TrimSpace(cells[i])
				}
				return cells
			}
		}
		return nil
	}
	figs, rats := section("Figures"), section("Ratios")
	for _, row := range rows {
		cells := find(figs, row.id)
		if len(cells) != 2+len(engines) {
			errs = append(errs, fmt.Errorf("figures: no row %s with %d cells (found %q)", row.id, 2+len(engines), cells))
		} else {
			for i, e := range engines {
				if c := cells[2+i]; row.has(e) && !row.optional && (c == "n/a" || c == "" || strings.Contains(c, "NaN")) {
					errs = append(errs, fmt.Errorf("figures: row %s has no figure for %s (%q)", row.id, e, c))
				}
			}
		}
		cells = find(rats, row.id)
		if len(cells) != 5 {
			errs = append(errs, fmt.Errorf("ratios: no row %s with 5 cells (found %q)", row.id, cells))
			continue
		}
		for i, e := range engines[1:] {
			if c := cells[1+i]; row.has(e) && !row.optional && (c == "n/a" || strings.Contains(c, "NaN")) {
				errs = append(errs, fmt.Errorf("ratios: row %s has no ratio to %s (%q)", row.id, e, c))
			}
		}
	}
	return errors.Join(errs...)
}

// div is a÷b, with 0÷0 as 1 (the same figure: no major fault on either
// side, say).
func div(a, b float64) float64 {
	if a == 0 && b == 0 {
		return 1
	}
	return a / b
}

func ratio(x float64) string { return num(x) + "×" }

func num(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "∞"

	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	case x >= 0.01 || x == 0:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.4f", x)
}

func kib(b float64) string { return fmt.Sprintf("%.0f KiB", b/(1<<10)) }

func perKey(b float64) string { return fmt.Sprintf("%.1f B/key", b) }
