//go:build !amd64

package mem

// Prefetch does nothing on this architecture.
func Prefetch(addr uintptr) {}
