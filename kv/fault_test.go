package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// faultOps is the workload of the fault tests: mostly adds, so that an
// operation applied twice shows, with puts and deletes between them. Every
// operation commits a record of its own (Submit), so that revision m is
// the state after the first m operations.
func faultOps(n int) []kv.Op {
	var ops []kv.Op
	for i := range n {
		switch i % 6 {
		case 0, 2, 4:
			ops = append(ops, kv.AddOp([]byte("c"), int64(i+1)))
		case 1:
			ops = append(ops, kv.PutOp(fmt.Appendf(nil, "k%d", i%5), bytes.Repeat([]byte{'v'}, i)))
		case 3:
			ops = append(ops, kv.DeleteOp(fmt.Appendf(nil, "k%d", (i+3)%5)))
		case 5:
			ops = append(ops, kv.AddOp(fmt.Appendf(nil, "n%d", i%3), -int64(i)))
		}
	}
	return ops
}

// modelDumps returns the map after each prefix of ops: element m is the
// dump after the first m operations.
func modelDumps(tb testing.TB, ops []kv.Op) []map[string]string {
	tb.Helper()
	m := record.NewMap()
	out := []map[string]string{{}}
	for i, op := range ops {
		if err := m.Apply(&record.Record{Revision: kv.Revision(i + 1), Ops: []record.Op{op}}); err != nil {
			tb.Fatalf("model: operation %d: %v", i+1, err)
		}
		d := map[string]string{}
		for e := range m.All(nil, nil) {
			d[string(e.Key)] = string(e.Value)
		}
		out = append(out, d)
	}
	return out
}

// checkPrefix checks that s holds the map after m operations for some m
// in [lo, hi]: nothing acknowledged lost (m >= lo), nothing applied twice
// or out of order (the map is exactly the model's at revision m).
func checkPrefix(s *kv.Store, models []map[string]string, lo, hi int) error {
	m := int(s.Revision())
	if m < lo || m > hi {
		return fmt.Errorf("recovered revision %d, want between %d (the last acknowledged) and %d", m, lo, hi)
	}
	if got := dumpStore(s); !mapsEqual(got, models[m]) {
		return fmt.Errorf("the map at revision %d is not the map after %d operations: got %v, want %v", m, m, got, models[m])
	}
	return nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// faultKind is one way to fail the N-th operation the rule counts.
type faultKind struct {
	name   string
	errno  syscall.Errno
	counts func(vfs.Op) bool                  // the operations numbered
	fail   func(op vfs.Op, errno error) error // the rule's error for the chosen one
	// segment and checkpoint sizes of the store
	segment, checkpoint int64
}

var faultKinds = []faultKind{
	// Any operation but statfs, which is a question whose failure only
	// makes the log reserve its full step (TestReserveFullDisk).
	{name: "EIO on any operation", errno: syscall.EIO, segment: 256, checkpoint: 1024,
		counts: func(op vfs.Op) bool { return op.Kind != vfs.OpStatfs },
		fail:   func(_ vfs.Op, e error) error { return e }},
	{name: "ENOSPC on writes and reservations", errno: syscall.ENOSPC, segment: 256, checkpoint: 1024,
		counts: func(op vfs.Op) bool { return op.Kind == vfs.OpWrite || op.Kind == vfs.OpPreallocate },
		fail:   func(_ vfs.Op, e error) error { return e }},
	// A write that runs out of space part way writes up to a page
	// boundary (here the 512-byte sector, the smaller unit the crash
	// models use) and fails: a write that crosses one leaves the first
	// part of a record in the file. Segments of 1 KiB so that records
	// cross the boundary at 512.
	{name: "short write", errno: syscall.ENOSPC, segment: 1024, checkpoint: 2048,
		counts: func(op vfs.Op) bool { return op.Kind == vfs.OpWrite },
		fail:   func(_ vfs.Op, e error) error { return &vfs.ShortWrite{N: 1 << 30, Align: wal.SectorSize, Err: e} }},
}

// faultRun is the outcome of one run with one injected fault.
type faultRun struct {
	injected bool
	op       vfs.Op // the failed operation
	acked    int    // operations acknowledged, 1..acked
	issued   int
	firstErr int      // the first operation that failed, 0 if none
	errs     []error  // every error a caller got
	logged   string   // the store's log
	problems []string // what went wrong
	torn     bool     // the reopen after a process crash cut a torn tail
}

// runWithFault runs open → the workload → Checkpoint → Close on a fresh
// MemFS with the n-th operation that kind counts failing, then reopens the
// files as a process crash and as a power loss leave them.
func runWithFault(t *testing.T, kind faultKind, n int, ops []kv.Op, models []map[string]string, bug variant.Bug) faultRun {
	var r faultRun
	mem := vfs.NewMem()
	var mu sync.Mutex
	seen := 0
	in := &vfs.Inject{FS: mem, Rule: func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if !kind.counts(op) {
			return nil
		}
		seen++
		if seen != n {
			return nil
		}
		r.injected, r.op = true, op
		return kind.fail(op, kind.errno)
	}}
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logBuf}, nil))
	opts := kv.Options{FS: in, SegmentSize: kind.segment, CheckpointBytes: kind.checkpoint, Logger: logger}
	opts.FS = variant.Wrap(opts.FS, bug)
	problem := func(format string, args ...any) { r.problems = append(r.problems, fmt.Sprintf(format, args...)) }

	s, err := kv.Open("/data", &opts)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("Open: %w", err))
	} else {
		for i, op := range ops {
			r.issued = i + 1
			if _, _, err := s.Submit(op).Wait(); err != nil {
				r.errs = append(r.errs, fmt.Errorf("operation %d: %w", i+1, err))
				if r.firstErr == 0 {
					r.firstErr = i + 1
				}
				if !errors.Is(err, kv.ErrFailed) {
					problem("operation %d: %v does not match kv.ErrFailed", i+1, err)
				}
				continue
			}
			if r.firstErr != 0 {
				problem("operation %d acknowledged after operation %d failed: the store is not fail-stop", i+1, r.firstErr)
			}
			r.acked = i + 1
		}
		if err := s.Checkpoint(); err != nil {
			r.errs = append(r.errs, fmt.Errorf("Checkpoint: %w", err))
		}
		if err := s.Close(); err != nil {
			r.errs = append(r.errs, fmt.Errorf("Close: %w", err))
		}
	}
	r.logged = logBuf.String()

	// Every error a caller got is the injected one, typed and naming the
	// file: it matches the errno, and its message names the path.
	for _, err := range r.errs {
		if !r.injected {
			problem("error without an injected fault: %v", err)
			continue
		}
		var pe *os.PathError
		if !errors.Is(err, kind.errno) || !errors.As(err, &pe) || pe.Path != r.op.Path {
			problem("error %q is not the injected %v as an *os.PathError for %s", err, kind.errno, r.op.Path)
		}
		if !strings.Contains(err.Error(), r.op.Path) {
			problem("error %q does not name the file %s", err, r.op.Path)
		}
	}

	// The files as a process crash leaves them (the page cache survives)
	// and as a power loss does: both must open, with every acknowledged
	// operation and at most the one in flight when the fault hit.
	hi := r.issued
	if r.firstErr != 0 {
		hi = r.firstErr
	}
	for _, st := range []struct {
		name string
		fs   *vfs.MemFS
	}{{"process crash", mem.Clone()}, {"power loss", mem.CrashClone()}} {
		o := kv.Options{FS: st.fs, SegmentSize: kind.segment, CheckpointBytes: kind.checkpoint}
		s, err := kv.Open("/data", &o)
		if err != nil {
			problem("%s: reopen: %v", st.name, err)
			continue
		}
		if err := checkPrefix(s, models, r.acked, hi); err != nil {
			problem("%s: %v", st.name, err)
		}
		if st.name == "process crash" && s.Stats().RecoveryTorn {
			r.torn = true
		}
		if err := s.Close(); err != nil {
			problem("%s: close after reopen: %v", st.name, err)
		}
	}
	return r
}

// syncWriter serializes writes to a buffer shared by the committer and a
// background checkpoint.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// faultStats counts the runs of one fault kind.
type faultStats struct {
	injected, survived int
	returned, logged   int // how the fault reached someone: an error to a caller, the log
	silent             map[string]int
	torn               int // runs whose files held half a record, cut by the reopen
}

// runFaults runs the workload once per operation number with that
// operation failing, until a run meets no fault, and returns the counts.
func runFaults(t *testing.T, kind faultKind, ops []kv.Op, bug variant.Bug) faultStats {
	models := modelDumps(t, ops)
	st := faultStats{silent: map[string]int{}}
	for n := 1; ; n++ {
		r := runWithFault(t, kind, n, ops, models, bug)
		if !r.injected {
			if len(r.problems) > 0 {
				t.Errorf("%s: without a fault: %s", kind.name, strings.Join(r.problems, "; "))
			}
			break
		}
		st.injected++
		if r.torn {
			st.torn++
		}
		switch {
		case len(r.errs) > 0:
			st.returned++
		case strings.Contains(r.logged, r.op.Path) && strings.Contains(r.logged, kind.errno.Error()):
			st.logged++
		default:
			st.silent[r.op.Kind.String()+" "+path.Base(r.op.Path)]++
			// Only the pid written into LOCK, for error messages, may
			// fail unnoticed; and a reservation of log space ahead of
			// the records that meets ENOSPC, which the log retries for
			// the records alone (here only one operation fails, so the
			// retry succeeds).
			absorbed := path.Base(r.op.Path) == kv.LockName ||
				r.op.Kind == vfs.OpPreallocate && kind.errno == syscall.ENOSPC
			if !absorbed {
				r.problems = append(r.problems, "the fault reached no caller and no log")
			}
		}
		if len(r.problems) == 0 {
			st.survived++
			continue
		}
		t.Errorf("%s #%d (%s %s, %d acknowledged, errors %v): %s", kind.name, n, r.op.Kind, r.op.Path, r.acked, r.errs,
			strings.Join(r.problems, "; "))
		if n > 2000 {
			t.Fatal("the workload never ran out of operations")
		}
	}
	return st
}

// TestFaultEveryOperation fails the N-th file operation of open → 48
// acknowledged writes (small segments and checkpoint threshold, so that
// segments rotate and background checkpoints run) → Checkpoint → Close,
// for every N: with EIO on any operation, with ENOSPC on every write and
// reservation (fallocate), and with a short write. After each run the
// files are reopened as a process crash and as a power loss leave them:
// no acknowledged operation may be lost, none applied twice, every error a
// caller got must match the injected errno and name the file, and no
// write may be acknowledged after one failed.
func TestFaultEveryOperation(t *testing.T) {
	ops := faultOps(48)
	total := faultStats{silent: map[string]int{}}
	for _, kind := range faultKinds {
		t.Run(strings.ReplaceAll(kind.name, " ", "_"), func(t *testing.T) {
			st := runFaults(t, kind, ops, variant.None)
			t.Logf("%s: %d faults injected, %d survived (returned to a caller %d, logged %d, absorbed %v; %d left half a record, cut at reopen)",
				kind.name, st.injected, st.survived, st.returned, st.logged, st.silent, st.torn)
			if st.injected < 20 {
				t.Errorf("only %d faults injected: the workload is too small to mean anything", st.injected)
			}
			if strings.HasPrefix(kind.name, "short") && st.torn == 0 {
				t.Error("no short write left part of a record in the file")
			}
			total.injected += st.injected
			total.survived += st.survived
		})
	}
	t.Logf("faults injected: %d, survived: %d", total.injected, total.survived)
}

// TestFaultCheckerCatchesNoSync shows that the fault checker fails on a
// store that acknowledges before syncing: a power loss then takes back
// acknowledged writes.
func TestFaultCheckerCatchesNoSync(t *testing.T) {
	models := modelDumps(t, faultOps(48))
	for n := 1; n < 400; n += 7 {
		r := runWithFault(t, faultKinds[0], n, faultOps(48), models, variant.NoSync)
		for _, p := range r.problems {
			if strings.Contains(p, "power loss") && strings.Contains(p, "want between") {
				return
			}
		}
	}
	t.Fatal("the no-sync bug variant lost no acknowledged write under the fault checker")
}
