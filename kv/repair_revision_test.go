package kv_test

import (
	"errors"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestRepairKeepsTokensStale is the review's sixth finding: a repair that
// cuts the log must not let revisions go backwards. Holder A takes a lock
// at revision T; bit rot before T makes the store refuse to open; the
// repair cuts the log there. Holder B then takes the lock: its token must
// differ from A's (revisions never repeat), so A's fenced write fails.
func TestRepairKeepsTokensStale(t *testing.T) {
	mem := vfs.NewMem()
	opts := &kv.Options{FS: mem}
	s, err := kv.Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	lock := []byte("lock/x")
	acquire := func(s *kv.Store) kv.Revision {
		t.Helper()
		res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Absent(lock)}, Then: []kv.Op{kv.PutOp(lock, []byte("holder"))}})
		if err != nil || !res.Succeeded {
			t.Fatalf("acquire: %+v, %v", res, err)
		}
		return res.Revision
	}
	tokenA := acquire(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Bit rot in the record of revision 2: later records prove it was
	// synced, so the store refuses the log until it is repaired.
	var off int64
	rd := &wal.Reader{FS: mem, Dir: "/data"}
	n := 0
	if _, err := rd.Scan(1, true, func(r wal.Record) error {
		if n++; n == 2 {
			off = r.Offset
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	name := wal.SegmentPath("/data", 1)
	b, _ := vfs.ReadFile(mem, name)
	b[off+30] ^= 0x08
	f, _ := mem.OpenReadWrite(name)
	f.WriteAt(b, 0)
	f.Sync()
	f.Close()
	if _, err := kv.Open("/data", opts); !recovery.IsCorrupt(err) {
		t.Fatalf("open of the damaged log: %v, want corruption", err)
	}
	plan, err := recovery.PlanRepair(mem, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(mem, nil); err != nil {
		t.Fatal(err)
	}
	// A read-only open sees the skip too, which only a mark after it
	// vouches for: without one it opened at the revision before the cut.
	ro := *opts
	ro.ReadOnly = true
	r, err := kv.Open("/data", &ro)
	if err != nil {
		t.Fatalf("read-only open after repair: %v", err)
	}
	if r.Revision() != plan.Skip {
		t.Errorf("read-only open after repair at revision %d, want the repair's skip, %d", r.Revision(), plan.Skip)
	}
	r.Close()

	s, err = kv.Open("/data", opts)
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	defer s.Close()
	// B re-creates the lock, as many writes after the cut as it takes to
	// reach A's revision if revisions restarted at the cut.
	for s.Revision()+1 < tokenA {
		if _, err := s.Put([]byte("filler"), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	tokenB := acquire(s)
	if tokenB <= tokenA {
		t.Errorf("after the repair, holder B got token %d, not above holder A's %d: revisions went backwards", tokenB, tokenA)
	}
	_, err = s.Fenced(kv.Fence{Key: lock, Token: tokenA}).Put([]byte("shard"), []byte("A's write"))
	if !errors.Is(err, kv.ErrFenced) {
		t.Errorf("holder A's fenced write with its pre-repair token %d: %v, want ErrFenced", tokenA, err)
	}
}
