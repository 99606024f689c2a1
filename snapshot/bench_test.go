package snapshot_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// benchSizes are the entry counts the benchmarks run at; values are 100
// bytes.
var benchSizes = []int{100_000}

// benchMap returns a map of n keys with 100-byte values, its meta, and
// the size of its snapshot.
func benchMap(b *testing.B, n int) (*record.Map, snapshot.Meta, int64) {
	b.Helper()
	m := record.NewMap()
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for i := range n {
		m.Load(&record.Entry{Key: fmt.Appendf(nil, "key/%09d", i), Value: value, CreateRev: 1, ModRev: record.Revision(i + 1), Version: 1})
	}
	m.SetRevision(record.Revision(n))
	meta := snapshot.Meta{Covered: 1, Revision: m.Revision(), Count: uint64(m.Len())}
	var cw countWriter
	if err := snapshot.Encode(&cw, meta, m.All(nil, nil)); err != nil {
		b.Fatal(err)
	}
	return m, meta, int64(cw)
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)

func benchFS(b *testing.B) *vfs.MemFS {
	b.Helper()
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("d", 0o755); err != nil {
		b.Fatal(err)
	}
	return fsys
}

func BenchmarkWrite(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			m, meta, size := benchMap(b, n)
			fsys := benchFS(b)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := snapshot.Write(fsys, "d", meta, m.All(nil, nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			m, meta, size := benchMap(b, n)
			fsys := benchFS(b)
			if err := snapshot.Write(fsys, "d", meta, m.All(nil, nil)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				got := 0
				err := snapshot.Read(fsys, "d", nil, func(*record.Entry) error {
					got++
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if got != n {
					b.Fatalf("Read %d entries, want %d", got, n)
				}
			}
		})
	}
}
