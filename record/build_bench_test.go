package record_test

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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

// BenchmarkOverwrite is a store under churn: random puts over 1M keys that
// exist, each a new version, so that the arena keeps evacuating chunks.
// It reports the slowest puts, which carry the evacuation's copying.
func BenchmarkOverwrite(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([][]byte, n)
	m := record.NewMap()
	val := make([]byte, 100)
	for i := range keys {
		keys[i] = make([]byte, 16)
		binary.BigEndian.PutUint64(keys[i], rng.Uint64())
		binary.BigEndian.PutUint64(keys[i][8:], uint64(i))
		m.Load(&record.Entry{Key: keys[i], Value: val, CreateRev: 1, ModRev: 1, Version: 1})
	}
	rev := record.Revision(1)
	lats := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		rev++
		r := record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindPut, Key: keys[rng.IntN(n)], Value: val}}}
		t := time.Now()
		if err := m.Apply(&r); err != nil {
			b.Fatal(err)
		}
		lats = append(lats, time.Since(t))
	}
	b.StopTimer()
	slices.Sort(lats)
	b.ReportMetric(float64(lats[len(lats)*999/1000].Nanoseconds()), "p99.9-ns")
	b.ReportMetric(float64(lats[len(lats)-1].Nanoseconds()), "max-ns")
}
