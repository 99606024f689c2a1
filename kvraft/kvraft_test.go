package kvraft

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// openMem opens a Store on a fresh in-memory file system.
func openMem(tb testing.TB, fs *vfs.MemFS) *Store {
	tb.Helper()
	s, err := Open("data", &Options{KV: kv.Options{FS: fs}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func mkLogs(lo, hi uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1 + i/10, Type: raft.LogCommand, Data: []byte{byte(i), 'x'}})
	}
	return logs
}

type bounds struct{ First, Last uint64 }

func getBounds(tb testing.TB, s *Store) bounds {
	tb.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		tb.Fatal(err)
	}
	l, err := s.LastIndex()
	if err != nil {
		tb.Fatal(err)
	}
	return bounds{f, l}
}

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  [][2]uint64 // StoreLogs of each range
		delete [][2]uint64 // then DeleteRange of each
		want   bounds
	}{
		{name: "empty", want: bounds{0, 0}},
		{name: "one batch", store: [][2]uint64{{1, 10}}, want: bounds{1, 10}},
		{name: "two batches", store: [][2]uint64{{1, 10}, {11, 20}}, want: bounds{1, 20}},
		{name: "front", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{1, 5}}, want: bounds{6, 20}},
		{name: "front from 0", store: [][2]uint64{{3, 20}}, delete: [][2]uint64{{0, 5}}, want: bounds{6, 20}},
		{name: "back", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{15, 20}}, want: bounds{1, 14}},
		{name: "back past last", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{15, 1 << 63}}, want: bounds{1, 14}},
		{name: "back to max uint64", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{15, 1<<64 - 1}}, want: bounds{1, 14}},
		{name: "all", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{1, 20}}, want: bounds{0, 0}},
		{name: "all then append", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{0, 100}}, want: bounds{0, 0}},
		{name: "both ends", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{1, 4}, {18, 30}}, want: bounds{5, 17}},
		{name: "back with a gap", store: [][2]uint64{{1, 5}, {10, 20}}, delete: [][2]uint64{{8, 20}}, want: bounds{1, 5}},
		{name: "front with a gap", store: [][2]uint64{{1, 5}, {10, 20}}, delete: [][2]uint64{{1, 7}}, want: bounds{10, 20}},
		{name: "middle", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{5, 6}}, want: bounds{1, 20}},
		{name: "outside", store: [][2]uint64{{10, 20}}, delete: [][2]uint64{{1, 5}, {30, 40}}, want: bounds{10, 20}},
		{name: "reversed range", store: [][2]uint64{{1, 20}}, delete: [][2]uint64{{10, 5}}, want: bounds{1, 20}},
		{name: "batched front", store: [][2]uint64{{1, 100}}, delete: [][2]uint64{{1, 90}}, want: bounds{91, 100}},
		{name: "batched back", store: [][2]uint64{{1, 100}}, delete: [][2]uint64{{11, 100}}, want: bounds{1, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s, err := Open("data", &Options{KV: kv.Options{FS: fs}, DeleteBatch: 7})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.store {
				if err := s.StoreLogs(mkLogs(r[0], r[1])); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tc.delete {
				if err := s.DeleteRange(r[0], r[1]); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, getBounds(t, s)); diff != "" {
				t.Errorf("bounds (-want +got):\n%s", diff)
			}
			// The same bounds after a reopen, read from the keys.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openMem(t, fs)
			if diff := cmp.Diff(tc.want, getBounds(t, s)); diff != "" {
				t.Errorf("bounds after reopen (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetLog(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	at := time.Unix(1700000000, 123456789)
	want := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("conf")},
		{Index: 2, Term: 2, Type: raft.LogCommand, Data: []byte("cmd"), Extensions: []byte("ext"), AppendedAt: at},
		{Index: 3, Term: 2, Type: raft.LogNoop},
	}
	if err := s.StoreLogs(want); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(*w, got); diff != "" {
			t.Errorf("GetLog(%d) (-want +got):\n%s", w.Index, diff)
		}
	}
	for _, i := range []uint64{0, 4, 1 << 40} {
		if err := s.GetLog(i, new(raft.Log)); err != raft.ErrLogNotFound {
			t.Errorf("GetLog(%d) = %v, want raft.ErrLogNotFound itself", i, err)
		}
	}
	if err := s.DeleteRange(2, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(2, new(raft.Log)); err != raft.ErrLogNotFound {
		t.Errorf("GetLog of a deleted index = %v, want raft.ErrLogNotFound", err)
	}
}

func TestGetLogCorrupt(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	// A value written under the wrong key: the index check catches it.
	if _, err := s.kv.Put(logKey(5), AppendLog(nil, &raft.Log{Index: 6})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.kv.Put(logKey(7), []byte{logVersion + 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		index uint64
		want  error
	}{{5, ErrCorrupt}, {7, ErrVersion}} {
		err := s.GetLog(tc.index, new(raft.Log))
		var ce *CorruptError
		if !errors.Is(err, tc.want) || !errors.As(err, &ce) || ce.Index != tc.index {
			t.Errorf("GetLog(%d) = %v, want %v naming the index", tc.index, err, tc.want)
		}
	}
}

func TestStable(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	if v, err := s.Get([]byte("CurrentTerm")); v != nil || err != ErrKeyNotFound || err.Error() != "not found" {
		t.Errorf("Get of a missing key = %q, %v; want nil and ErrKeyNotFound saying %q", v, err, "not found")
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("GetUint64 of a missing key = %d, %v; want 0 and ErrKeyNotFound (raft-boltdb's answer)", v, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(nil, []byte("x")); !errors.Is(err, ErrBadKey) {
		t.Errorf("Set of an empty key = %v, want ErrBadKey", err)
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetUint64 of a 6-byte value = %v, want ErrCorrupt", err)
	}
	// The stable keys are not log entries.
	if b := getBounds(t, s); b != (bounds{}) {
		t.Errorf("bounds = %+v after stable writes alone, want none", b)
	}
	s.Close()
	s = openMem(t, fs)
	term, err := s.GetUint64([]byte("CurrentTerm"))
	if err != nil || term != 42 {
		t.Errorf("GetUint64 after reopen = %d, %v; want 42", term, err)
	}
	v, err := s.Get([]byte("LastVoteCand"))
	if diff := cmp.Diff("node-2", string(v)); diff != "" || err != nil {
		t.Errorf("Get after reopen (-want +got):\n%s%v", diff, err)
	}
	if v, err := s.Get([]byte("empty")); err != nil || v == nil || len(v) != 0 {
		t.Errorf("Get of a key set empty = %q, %v; want an empty, non-nil value", v, err)
	}
}

func TestClosed(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	s.Close()
	if err := s.StoreLog(&raft.Log{Index: 1}); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("StoreLog after Close = %v, want kv.ErrClosed", err)
	}
	if _, err := s.LastIndex(); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("LastIndex after Close = %v, want kv.ErrClosed", err)
	}
}
