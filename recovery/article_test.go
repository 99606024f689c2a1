package recovery_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/layered"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// articleOps is the article's workload: ten increments, five puts, one
// delete and one more increment, 17 records in one segment.
func articleOps() []record.Op {
	var ops []record.Op
	for i := 1; i <= 10; i++ {
		ops = append(ops, record.Op{Kind: record.KindAdd, Key: []byte("c"), Delta: int64(i)})
	}
	for i := 1; i <= 5; i++ {
		ops = append(ops, record.Op{Kind: record.KindPut, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	ops = append(ops, record.Op{Kind: record.KindDelete, Key: []byte("k3")})
	ops = append(ops, record.Op{Kind: record.KindAdd, Key: []byte("d"), Delta: 7})
	return ops
}

var articleWant = map[string]string{"c": "55", "d": "7", "k1": "v1", "k2": "v2", "k4": "v4", "k5": "v5"}

// writeLog writes ops as records with revisions from first on, into
// segment seg of dir, each synced, and leaves the segment unsealed.
func writeLog(tb testing.TB, fsys vfs.FS, dir string, seg wal.SegmentNum, first record.Revision, ops []record.Op) {
	tb.Helper()
	w, err := wal.Create(fsys, dir, seg, wal.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	for i, op := range ops {
		p := record.Append(nil, &record.Record{Revision: first + record.Revision(i), Ops: []record.Op{op}})
		if _, err := w.Append(p); err != nil {
			tb.Fatal(err)
		}
		// One sync per record, as when each write is acknowledged on its
		// own: each record then proves the ones before it were synced.
		if err := w.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// dump returns the keys and values of m, a recovered map (*layered.Map)
// or a salvaged one (*record.Map).
func dump(m any) map[string]string {
	out := map[string]string{}
	switch m := m.(type) {
	case *layered.Map:
		for e, err := range m.All(nil, nil) {
			if err != nil {
				panic(err)
			}
			out[string(e.Key)] = string(e.Value)
		}
	case *record.Map:
		for e := range m.All(nil, nil) {
			out[string(e.Key)] = string(e.Value)
		}
	default:
		panic(fmt.Sprintf("dump of a %T", m))
	}
	return out
}

func TestArticleWorkload(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/data"
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeLog(t, fsys, dir, 1, 1, articleOps())
	for i := range 2 {
		res, err := recovery.Recover(fsys, dir, recovery.Options{})
		if err != nil {
			t.Fatalf("recovery %d: %v", i+1, err)
		}
		if diff := cmp.Diff(articleWant, dump(res.Map)); diff != "" {
			t.Errorf("recovery %d: map (-want +got):\n%s", i+1, diff)
		}
		if res.Map.Revision() != 17 {
			t.Errorf("recovery %d: revision %d, want 17", i+1, res.Map.Revision())
		}
		res.Writer.Close()
		names, _ := fsys.List(dir)
		if diff := cmp.Diff([]string{"KVSTORE", "log.000002", "snapshot"}, names); diff != "" {
			t.Errorf("recovery %d: files (-want +got):\n%s", i+1, diff)
		}
	}
}
