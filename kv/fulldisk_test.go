package kv_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestFullDisk fills the disk part way through a workload: the write that
// meets ENOSPC returns it to its caller (matching syscall.ENOSPC and
// kv.ErrFailed, naming the file), every later write is refused even once
// space is free again, so that nothing can follow a half-written record,
// and a reopen after space is freed holds every acknowledged write. The
// reopened store then appends and a further reopen agrees: the torn tail
// was cut before anything was written after it.
func TestFullDisk(t *testing.T) {
	tests := []struct {
		name string
		opts kv.Options
		// rule fails an operation with ENOSPC while the disk is full.
		rule func(op vfs.Op) error
		// fullAt is the operation before which the disk fills.
		fullAt int
		// wantAcked: at least this many operations succeed after the disk
		// filled (reserved space still takes writes).
		wantAcked int
		// wantTorn: part of a record reached the file, and the reopen
		// after a process crash cuts it.
		wantTorn bool
	}{
		{
			// With preallocation (the default) log space is reserved a
			// step ahead of the records (here a quarter of the 4 KiB
			// segment): writes go on into the reserved space, and ENOSPC
			// comes from fallocate at the next step, never from the
			// middle of a record.
			name: "fallocate a step ahead",
			opts: kv.Options{SegmentSize: 4096, CheckpointBytes: -1},
			rule: func(op vfs.Op) error {
				if op.Kind == vfs.OpPreallocate {
					return syscall.ENOSPC
				}
				return nil
			},
			fullAt: 10, wantAcked: 5,
		},
		{
			name: "write without preallocation",
			opts: kv.Options{SegmentSize: 4096, CheckpointBytes: -1, NoPreallocate: true},
			rule: func(op vfs.Op) error {
				if op.Kind == vfs.OpWrite && strings.Contains(op.Path, "log.") {
					return syscall.ENOSPC
				}
				return nil
			},
			fullAt: 30,
		},
		{
			// The kernel fills the page cache a page at a time: a write
			// that runs out of space stops at a page boundary (here a
			// sector), leaving the first part of a record.
			name: "short write at a page boundary",
			opts: kv.Options{SegmentSize: 1 << 20, CheckpointBytes: -1, NoPreallocate: true},
			// The disk fills at the next sector boundary: the first write
			// that crosses one writes up to it and fails.
			rule: func(op vfs.Op) error {
				if op.Kind == vfs.OpWrite && strings.Contains(op.Path, "log.") &&
					op.Off/wal.SectorSize != (op.Off+op.Len-1)/wal.SectorSize {
					return &vfs.ShortWrite{N: 1 << 30, Align: wal.SectorSize, Err: syscall.ENOSPC}
				}
				return nil
			},
			fullAt: 10, wantAcked: 1, wantTorn: true,
		},
	}
	ops := faultOps(120)
	models := modelDumps(t, ops)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var full atomic.Bool
			in := &vfs.Inject{FS: mem, Rule: func(op vfs.Op) error {
				if full.Load() {
					return tc.rule(op)
				}
				return nil
			}}
			opts := tc.opts
			opts.FS = in
			s, err := kv.Open("/data", &opts)
			if err != nil {
				t.Fatal(err)
			}
			acked, failedAt := 0, 0
			for i, op := range ops {
				if i+1 == tc.fullAt {
					full.Store(true)
				}
				_, _, err := s.Submit(op).Wait()
				if err == nil {
					acked = i + 1
					continue
				}
				failedAt = i + 1
				if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, kv.ErrFailed) {
					t.Fatalf("operation %d: %v, want ENOSPC and kv.ErrFailed", i+1, err)
				}
				if !strings.Contains(err.Error(), "/data/log.") {
					t.Errorf("operation %d: %v does not name the file", i+1, err)
				}
				break
			}
			if failedAt == 0 {
				t.Fatal("the disk never filled")
			}
			if acked-tc.fullAt+1 < tc.wantAcked {
				t.Errorf("%d writes succeeded after the disk filled, want at least %d", acked-tc.fullAt+1, tc.wantAcked)
			}
			// Space is freed: the store still refuses writes, checkpoints
			// and syncs, and never retries what failed.
			full.Store(false)
			if _, err := s.Put([]byte("after"), []byte("x")); !errors.Is(err, kv.ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("Put after space is freed: %v, want ErrFailed wrapping ENOSPC", err)
			}
			if err := s.Checkpoint(); !errors.Is(err, kv.ErrFailed) {
				t.Errorf("Checkpoint after the failure: %v, want ErrFailed", err)
			}
			if err := s.Sync(); !errors.Is(err, kv.ErrFailed) {
				t.Errorf("Sync after the failure: %v, want ErrFailed", err)
			}
			if got := int(s.Revision()); got != acked {
				t.Errorf("visible revision %d after the failure, want %d: only acknowledged writes are visible", got, acked)
			}
			s.Close()

			for _, st := range []struct {
				name string
				fs   *vfs.MemFS
			}{{"process crash", mem.Clone()}, {"power loss", mem.CrashClone()}} {
				o := tc.opts
				o.FS = st.fs
				r, err := kv.Open("/data", &o)
				if err != nil {
					t.Fatalf("%s: reopen after space is freed: %v", st.name, err)
				}
				if err := checkPrefix(r, models, acked, failedAt); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				t.Logf("%s: reopened at revision %d (acknowledged %d), torn tail cut: %v", st.name, r.Revision(), acked, r.Stats().RecoveryTorn)
				if st.name == "process crash" && r.Stats().RecoveryTorn != tc.wantTorn {
					t.Errorf("%s: torn tail cut %v, want %v", st.name, r.Stats().RecoveryTorn, tc.wantTorn)
				}
				// Append after the reopen, then reopen again: the records
				// written after the cut are read back, so the half record
				// was not left in front of them.
				base := int(r.Revision())
				for i := base; i < base+5 && i < len(ops); i++ {
					if _, _, err := r.Submit(ops[i]).Wait(); err != nil {
						t.Fatalf("%s: write after the reopen: %v", st.name, err)
					}
				}
				r.Close()
				again := reopen(t, st.fs, o)
				if err := checkPrefix(again, models, base+5, base+5); err != nil {
					t.Errorf("%s: second reopen: %v", st.name, err)
				}
				again.Close()
			}
		})
	}
}

// TestShortWriteMidSector documents what a short write that stops inside
// a sector leaves: the first bytes of a record followed by the reserved
// zeros, with no zeroed sector in the record's extent. The kernel does not
// cut writes there (it fills whole pages), and the reader refuses that
// shape as corruption rather than take bit rot for a torn tail: the reopen
// either recovers every acknowledged write or refuses with an error that
// names the file and the offset of the half record and changes nothing,
// and then a repair keeps every acknowledged write (the half record was
// never acknowledged).
func TestShortWriteMidSector(t *testing.T) {
	ops := faultOps(20)
	models := modelDumps(t, ops)
	mem := vfs.NewMem()
	var full atomic.Bool
	in := &vfs.Inject{FS: mem, Rule: func(op vfs.Op) error {
		if full.Load() && op.Kind == vfs.OpWrite && strings.Contains(op.Path, "log.") {
			return &vfs.ShortWrite{N: 30, Err: syscall.ENOSPC}
		}
		return nil
	}}
	s, err := kv.Open("/data", &kv.Options{FS: in})
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for i, op := range ops {
		if i == 10 {
			full.Store(true)
		}
		if _, _, err := s.Submit(op).Wait(); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("operation %d: %v, want ENOSPC", i+1, err)
			}
			break
		}
		acked = i + 1
	}
	s.Close()
	if acked != 10 {
		t.Fatalf("%d operations acknowledged, want 10", acked)
	}
	fsys := mem.Clone() // the page cache holds the half record
	before := dirFiles(t, fsys, "/data")
	r, err := kv.Open("/data", &kv.Options{FS: fsys})
	if err == nil {
		if err := checkPrefix(r, models, acked, acked+1); err != nil {
			t.Fatal(err)
		}
		r.Close()
		return
	}
	var ce *wal.CorruptError
	if !recovery.IsCorrupt(err) || !errors.As(err, &ce) || !strings.HasSuffix(ce.File, "/log.000001") || ce.Offset <= 0 {
		t.Fatalf("reopen: %v, want a corruption error naming log.000001 and the offset", err)
	}
	t.Logf("reopen refused: %v", err)
	if d := diffFiles(before, dirFiles(t, fsys, "/data")); d != "" {
		t.Errorf("a refused open changed files: %s", d)
	}
	plan, err := recovery.PlanRepair(fsys, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if int(plan.KeepThrough) < acked {
		t.Errorf("the repair keeps revisions through %d, but %d were acknowledged", plan.KeepThrough, acked)
	}
	if err := plan.Apply(fsys, nil); err != nil {
		t.Fatal(err)
	}
	r = reopen(t, fsys, kv.Options{})
	// The repair ends the log with a skip past every revision the half
	// record could have held: the map is the acknowledged one.
	if got := dumpStore(r); !mapsEqual(got, models[acked]) || r.Revision() != plan.Skip || int(plan.Skip) <= acked {
		t.Errorf("after the repair: revision %d (skip %d), map %v; want the map after %d operations at the skip, past %d",
			r.Revision(), plan.Skip, got, acked, acked)
	}
}
