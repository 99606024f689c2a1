package record_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kv/record"
)

// BenchmarkBuild is the end of a replay: 1M keys of 16 random-looking
// bytes in the hash index, then the ordered tree built from them.
func BenchmarkBuild(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	entries := make([]*record.Entry, n)
	for i := range entries {
		k := make([]byte, 16)
		binary.BigEndian.PutUint64(k, rng.Uint64())
		binary.BigEndian.PutUint64(k[8:], rng.Uint64())
		entries[i] = &record.Entry{Key: k, Value: make([]byte, 100), CreateRev: 1, ModRev: 1, Version: 1}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		m := record.NewMap()
		m.Reserve(n)
		m.Defer()
		for _, e := range entries {
			m.Load(e)
		}
		b.StartTimer()
		m.Build()
	}
}
