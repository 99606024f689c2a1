package bench

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftbench "github.com/hashicorp/raft/bench"
	"github.com/kvstore/kv/kvraft"
)

// raftStore is what hashicorp/raft/bench's functions take.
type raftStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// raftStores open kvraft and raft-boltdb v2 on a new directory.
var raftStores = []struct {
	name string
	open func(tb testing.TB) raftStore
}{
	{"kvraft", func(tb testing.TB) raftStore {
		s, err := kvraft.Open(filepath.Join(tb.TempDir(), "kvraft"), nil)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}},
	{"raft-boltdb", func(tb testing.TB) raftStore {
		s, err := raftboltdb.NewBoltStore(filepath.Join(tb.TempDir(), "raft.db"))
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}},
}

// BenchmarkRaftStore runs github.com/hashicorp/raft/bench's functions on
// each store, a new one for each: compare with
// go test -run '^$' -bench RaftStore -count 5 . | benchstat -col /store -.
func BenchmarkRaftStore(b *testing.B) {
	for _, bm := range []struct {
		name string
		fn   func(*testing.B, raftStore)
	}{
		{"FirstIndex", func(b *testing.B, s raftStore) { raftbench.FirstIndex(b, s) }},
		{"LastIndex", func(b *testing.B, s raftStore) { raftbench.LastIndex(b, s) }},
		{"GetLog", func(b *testing.B, s raftStore) { raftbench.GetLog(b, s) }},
		{"StoreLog", func(b *testing.B, s raftStore) { raftbench.StoreLog(b, s) }},
		{"StoreLogs", func(b *testing.B, s raftStore) { raftbench.StoreLogs(b, s) }},
		{"DeleteRange", func(b *testing.B, s raftStore) { raftbench.DeleteRange(b, s) }},
		{"Set", func(b *testing.B, s raftStore) { raftbench.Set(b, s) }},
		{"SetUint64", func(b *testing.B, s raftStore) { raftbench.SetUint64(b, s) }},
		{"Get", func(b *testing.B, s raftStore) { raftbench.Get(b, s) }},
		{"GetUint64", func(b *testing.B, s raftStore) { raftbench.GetUint64(b, s) }},
	} {
		for _, st := range raftStores {
			b.Run(bm.name+"/store="+st.name, func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				b.ReportAllocs()
				bm.fn(b, s)
			})
		}
	}
}

// TestRaftStoreBench runs each of raft's bench functions once on each
// store, so that go test checks they work (the bench functions fail b on
// any error).
func TestRaftStoreBench(t *testing.T) {
	r := testing.Benchmark(func(b *testing.B) {
		for _, st := range raftStores {
			s := st.open(b)
			raftbench.StoreLogs(b, s)
			raftbench.DeleteRange(b, s)
			s.Close()
		}
	})
	if r.N == 0 {
		t.Fatal("the raft bench functions failed")
	}
}
