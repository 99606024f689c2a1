package mem

// Prefetch asks the processor to bring the cache line at addr into the
// cache, without waiting for it: a lookup in a table far bigger than the
// cache can start its miss early, while other work goes on, and a batch
// of them overlap. addr need not be valid: a prefetch never faults.
//
//go:noescape
func Prefetch(addr uintptr)
