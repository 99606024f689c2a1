package kvcli

import "fmt"

// Plural is "1 thing" or "N things": a count as a sentence says it
// ("1 lease", "0 leases", "2 leases"), for every count kv prints.
func Plural[N ~int | ~int64 | ~uint64](n N, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
