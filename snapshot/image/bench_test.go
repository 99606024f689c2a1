package image

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// BenchmarkGet looks up random keys of a mapped image of n entries
// (7-byte keys, 100-byte values), warm, on one goroutine.
func BenchmarkGet(b *testing.B) {
	for _, n := range []int{10_000, 300_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			c := makeContent(n, func(int) int { return 100 }, false)
			r, err := Open(vfs.OS, osFile(b, c.encode(b)))
			must(b, err)
			defer r.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			var buf []byte
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_, out, ok, err := r.GetAppend(buf[:0], c.entries[rng.IntN(n)].Key)
				if !ok || err != nil {
					b.Fatal(ok, err)
				}
				buf = out
			}
		})
	}
}

// BenchmarkScan walks every entry of a mapped image of n entries.
func BenchmarkScan(b *testing.B) {
	const n = 100_000
	c := makeContent(n, func(int) int { return 100 }, false)
	r, err := Open(vfs.OS, osFile(b, c.encode(b)))
	must(b, err)
	defer r.Close()
	b.ReportAllocs()
	b.SetBytes(int64(n * 116))
	for range b.N {
		k := 0
		for _, err := range r.All(nil, nil) {
			if err != nil {
				b.Fatal(err)
			}
			k++
		}
		if k != n {
			b.Fatal(k)
		}
	}
}
