package kv_test

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// craftedDir writes, in a fresh in-memory file system, a directory made
// by hand: an empty snapshot at revision rev covering no segment, and an
// empty log.000001.
func craftedDir(t *testing.T, rev record.Revision) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data", 0o700); err != nil {
		t.Fatal(err)
	}
	meta := snapshot.Meta{Covered: 0, Revision: rev}
	if err := snapshot.Write(mem, "/data", meta, func(func(*record.Entry) bool) {}); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(mem, "/data", 1, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestSnapshotPastMaxRevisionRefused opens a snapshot crafted at a
// revision no store can continue from: Open must refuse it as a corrupt
// snapshot naming the file and the meta frame's offset, and change
// nothing. Accepted, it made the next Put commit at revision 0 (or past
// the int64 that compares use), and the reopen refuse the log.
func TestSnapshotPastMaxRevisionRefused(t *testing.T) {
	tests := []struct {
		name string
		rev  record.Revision
	}{
		{name: "2^64-1", rev: math.MaxUint64},
		{name: "MaxRevision+1", rev: record.MaxRevision + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := craftedDir(t, tc.rev)
			before := dirFiles(t, mem, "/data")
			s, err := kv.Open("/data", &kv.Options{FS: mem})
			if err == nil {
				rev, perr := s.Put([]byte("k"), []byte("v"))
				s.Close()
				_, rerr := kv.Open("/data", &kv.Options{FS: mem.CrashClone()})
				t.Fatalf("Open of a snapshot at revision %d succeeded; a Put then returned revision %d, %v; the reopen: %v",
					tc.rev, rev, perr, rerr)
			}
			var ce *wal.CorruptError
			if !errors.Is(err, snapshot.ErrCorrupt) || !errors.As(err, &ce) || ce.File != "/data/snapshot" || ce.Offset != 8 {
				t.Errorf("Open: %v, want snapshot.ErrCorrupt at /data/snapshot offset 8", err)
			}
			if d := diffFiles(before, dirFiles(t, mem, "/data")); d != "" {
				t.Errorf("a refused open changed files: %s", d)
			}
		})
	}
}

// TestRevisionsExhausted opens a store at MaxRevision-1: it takes one
// write, at MaxRevision, and then refuses every write that needs a
// revision with ErrRevisionsExhausted, committing nothing and not failing
// the store; it still reopens, and refuses again.
func TestRevisionsExhausted(t *testing.T) {
	mem := craftedDir(t, record.MaxRevision-1)
	s := reopen(t, mem, kv.Options{})
	rev, err := s.Put([]byte("last"), []byte("v"))
	if err != nil || rev != record.MaxRevision {
		t.Fatalf("Put at MaxRevision-1: revision %d, %v; want %d", rev, err, record.MaxRevision)
	}
	refused := func(t *testing.T, s *kv.Store) {
		t.Helper()
		writes := []struct {
			name  string
			write func() (kv.Revision, error)
		}{
			{"Put", func() (kv.Revision, error) { return s.Put([]byte("k"), []byte("v")) }},
			{"Put over the last key", func() (kv.Revision, error) { return s.Put([]byte("last"), []byte("w")) }},
			{"Delete", func() (kv.Revision, error) { return s.Delete([]byte("last")) }},
			{"Add", func() (kv.Revision, error) { _, rev, err := s.Add([]byte("n"), 1); return rev, err }},
			{"Txn", func() (kv.Revision, error) {
				res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Exists([]byte("last"))}, Then: []kv.Op{kv.DeleteOp([]byte("last"))}})
				return res.Revision, err
			}},
			{"Submit", func() (kv.Revision, error) {
				rev, _, err := s.Submit(kv.PutOp([]byte("k"), nil)).Wait()
				return rev, err
			}},
			{"fenced Put", func() (kv.Revision, error) {
				return s.Fenced(kv.Fence{Key: []byte("last"), Token: record.MaxRevision}).Put([]byte("k"), []byte("v"))
			}},
		}
		for _, w := range writes {
			rev, err := w.write()
			if !errors.Is(err, kv.ErrRevisionsExhausted) || errors.Is(err, kv.ErrFailed) || rev != 0 {
				t.Errorf("%s at MaxRevision: revision %d, %v; want 0, ErrRevisionsExhausted", w.name, rev, err)
			}
		}
		// A transaction that commits nothing needs no revision.
		res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Absent([]byte("last"))}, Then: []kv.Op{kv.PutOp([]byte("x"), nil)}})
		if err != nil || res.Committed || res.Revision != record.MaxRevision {
			t.Errorf("Txn whose branch is empty: %+v, %v; want uncommitted at MaxRevision", res, err)
		}
		e, err := s.Get([]byte("last"))
		if err != nil || string(e.Value) != "v" || e.ModRev != record.MaxRevision {
			t.Errorf("Get: %+v, %v; want v at MaxRevision", e, err)
		}
		if s.Revision() != record.MaxRevision {
			t.Errorf("revision %d, want %d", s.Revision(), record.MaxRevision)
		}
		if d := cmp.Diff(map[string]string{"last": "v"}, dumpStore(s)); d != "" {
			t.Errorf("map (-want +got):\n%s", d)
		}
		if st := s.Stats(); st.Failed != nil {
			t.Errorf("the store failed: %v", st.Failed)
		}
	}
	refused(t, s)
	if err := s.Checkpoint(); err != nil {
		t.Errorf("Checkpoint at MaxRevision: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"power loss", "process crash"} {
		fsys := mem.CrashClone()
		if name == "process crash" {
			fsys = mem.Clone()
		}
		r := reopen(t, fsys, kv.Options{})
		refused(t, r)
		r.Close()
	}
}
