package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/kvstore/kv/bench/internal/units"
)

// report writes the tables: medians per engine, and the image's
// advantage over each other engine per round (median and range; above 1,
// the image does better: less time, less memory, more Gets).
func report(w io.Writer, res []map[string]metrics, keys int, sizes map[string]int64) {
	med := func(e, name string) float64 {
		var v []float64
		for _, r := range res {
			v = append(v, r[e][name])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	// adv returns the median and range over rounds of the image's
	// advantage over engine e in figure name.
	adv := func(e, name string, higherBetter bool) string {
		var v []float64
		for _, r := range res {
			a, b := r["image"][name], r[e][name]
			if higherBetter {
				v = append(v, a/b)
			} else {
				v = append(v, b/a)
			}
		}
		slices.Sort(v)
		return fmt.Sprintf("%s (%s–%s)", ratio(v[len(v)/2]), num(v[0]), ratio(v[len(v)-1]))
	}
	fmt.Fprintf(w, "## The image against bbolt, pebble and kv as it opens today: %d keys, %d round(s), warm page cache\n\n", keys, len(res))
	fmt.Fprintf(w, "Files: image %s, bbolt %s, kv (snapshot and log) %s, pebble %s.\n\n",
		units.MiB(float64(sizes["image"])), units.MiB(float64(sizes["bbolt"])), units.MiB(float64(sizes["kv"])), units.MiB(float64(sizes["pebble"])))
	fmt.Fprintln(w, "| | image | bbolt | kv today | pebble | image vs bbolt | image vs kv today | image vs pebble |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	rows := []struct {
		label, name  string
		higherBetter bool
		format       func(float64) string
	}{
		{"open", "open.s", false, units.Dur},
		{"heap in use after open", "open.heap", false, units.MiB},
		{"resident set after open", "open.rss", false, units.MiB},
		{"resident set added by the open", "open.rssadded", false, units.MiB},
		{"first Get after open", "get1.s", false, units.Dur},
		{"random Gets, 1 goroutine (per second)", "get.ops", true, units.Ops},
		{"full scan in key order", "scan.s", false, units.Dur},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |", r.label)
		for _, e := range engines {
			fmt.Fprintf(w, " %s |", r.format(med(e, r.name)))
		}
		for _, e := range engines[1:] {
			fmt.Fprintf(w, " %s |", adv(e, r.name, r.higherBetter))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nThe ratio columns give the image's advantage, per round (median, range): the other's time or memory over the image's, or the image's Gets per second over the other's; above one, the image does better.")

	fmt.Fprintf(w, "\n## Cold: the store's files evicted from the page cache (posix_fadvise DONTNEED), then open and one Get\n\n")
	fmt.Fprintln(w, "| | image | bbolt |")
	fmt.Fprintln(w, "|---|---|---|")
	cold := []struct {
		label, name string
		format      func(float64) string
	}{
		{"cold open", "open.s", units.Dur},
		{"major page faults during the open", "open.majflt", units.Count},
		{"first Get after a cold open", "get1.s", units.Dur},
		{"major page faults during the first Get", "get1.majflt", units.Count},
	}
	for _, r := range cold {
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.label, r.format(med("image cold", r.name)), r.format(med("bbolt cold", r.name)))
	}
}

func ratio(x float64) string { return num(x) + "×" }

func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
