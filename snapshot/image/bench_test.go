package image

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kv/record"
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

// BenchmarkOpen opens a warm image and closes it (FORMAT.md "Snapshot
// image", step 1): the map, the first page, the footer, the page
// checksum table and the leases; in version 4, the block index's
// checksum and its walk too, which version 5 leaves to the reads that
// need them. Both versions, on the same entries: two shapes of keys,
// 100-byte values, 300k keys of 7 bytes ("k000000"…), and 1M keys of 16
// random-looking bytes, the bench module's data set's shape, whose first
// eight bytes differ from one block's first key to the next.
func BenchmarkOpen(b *testing.B) {
	for _, tc := range []struct{ n, keyLen int }{{300_000, 7}, {1_000_000, 16}} {
		c := makeContent(tc.n, func(int) int { return 100 }, false)
		if tc.keyLen == 16 {
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range c.entries {
				c.entries[i].Key = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, rng.Uint64()), uint64(i))
			}
			slices.SortFunc(c.entries, func(x, y record.Entry) int { return bytes.Compare(x.Key, y.Key) })
		}
		for _, v := range []uint16{Version, VersionBlockNumbered} {
			b.Run(fmt.Sprintf("keys=%d/key=%dB/version=%d", tc.n, tc.keyLen, v), func(b *testing.B) {
				name := osFile(b, c.encodeVersion(b, v))
				b.ResetTimer()
				for range b.N {
					r, err := Open(vfs.OS, name)
					must(b, err)
					r.Close()
				}
			})
		}
	}
}
