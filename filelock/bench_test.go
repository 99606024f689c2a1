package filelock

import (
	"context"
	"testing"

	"github.com/kvstore/kv/kv"
)

// BenchmarkStoreOpen is the cost every lock operation of a short-lived
// process pays: opening the store for writing and closing it.
func BenchmarkStoreOpen(b *testing.B) {
	dir := b.TempDir()
	l := openLocker(b, dir)
	h := mustAcquire(b, l, "job")
	h.Release()
	o := DefaultStoreOptions
	for b.Loop() {
		s, err := kv.Open(dir, &o)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkCycle is one acquire and release by one process.
func BenchmarkCycle(b *testing.B) {
	for _, mode := range []string{"open", "new"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			l := openLocker(b, dir)
			if mode == "new" {
				s, err := kv.Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if l, err = New(s); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				h, err := l.Acquire(context.Background(), "job")
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
