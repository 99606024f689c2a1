// Package units formats the figures of the benchmark commands' reports,
// one way per unit, so that a figure of a unit reads the same in every
// results file (and figcheck, which matches figures as text, finds it).
package units

import (
	"fmt"
	"time"
)

// Count formats a number of things (pages, faults, keys): no decimals.
func Count(x float64) string { return fmt.Sprintf("%.0f", x) }

// MiB formats a size in bytes as MiB with one decimal.
func MiB(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// Ops formats a rate per second: millions with two decimals, else
// thousands with none.
func Ops(x float64) string {
	if x >= 1e6 {
		return fmt.Sprintf("%.2f M", x/1e6)
	}
	return fmt.Sprintf("%.0f k", x/1e3)
}

// Dur formats a time in seconds in the unit that suits it: µs (two
// decimals below 10 µs), ms with two decimals, or s.
func Dur(s float64) string {
	d := time.Duration(s * 1e9)
	switch {
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2f µs", s*1e6)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}
