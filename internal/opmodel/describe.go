package opmodel

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Describe words how got differs from want, key by key in key order, as
// the article does: "c=110 instead of 55, d=14 instead of 7". A key that
// should be there and is not, or that should not be there and is, gets
// its own words; two equal maps are "same map". Long keys and values are
// shortened and a long list is cut.
func Describe(want, got map[string]string) string {
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	const most = 8
	var parts []string
	n := 0
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		var part string
		switch {
		case wok && gok && w != g:
			part = fmt.Sprintf("%s=%s instead of %s", short(k), short(g), short(w))
		case wok && !gok:
			part = fmt.Sprintf("%s missing (want %s)", short(k), short(w))
		case !wok && gok:
			part = fmt.Sprintf("%s=%s should not exist", short(k), short(g))
		default:
			continue
		}
		n++
		if n <= most {
			parts = append(parts, part)
		}
	}
	if n == 0 {
		return "same map"
	}
	if n > most {
		parts = append(parts, fmt.Sprintf("and %d more keys", n-most))
	}
	return strings.Join(parts, ", ")
}

// Summary prints a map on one line, keys sorted, keys and values
// shortened as Describe does.
func Summary(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = short(k) + "=" + short(m[k])
	}
	return strings.Join(parts, " ")
}

// short shortens a key or value for a one-line description.
func short(s string) string {
	const most = 24
	q := s
	if strings.ContainsAny(s, "=, \n") || !strconv.CanBackquote(s) {
		q = strconv.Quote(s)
	}
	if len(q) > most {
		return q[:most-3] + "..."
	}
	return q
}

// Diff lists every key where got differs from want, one line per side in
// key order, "-" for want's entry and "+" for got's, values quoted; equal
// maps give "". It is the full form of Describe, for a report to keep.
// (The checkers once used go-cmp for this; it is one line of this, and
// its package init cost every run of the kv command a millisecond.)
func Diff(want, got map[string]string) string {
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		if wok && gok && w == g {
			continue
		}
		if wok {
			fmt.Fprintf(&b, "-\t%q: %q\n", k, w)
		}
		if gok {
			fmt.Fprintf(&b, "+\t%q: %q\n", k, g)
		}
	}
	return b.String()
}

// Equal reports whether two maps hold the same entries.
func Equal(want, got map[string]string) bool { return maps.Equal(want, got) }
