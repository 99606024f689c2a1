package kv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// ackedSurvive writes from several goroutines and, after every
// acknowledgement, checks that a power loss at that moment keeps it. It
// returns the number of acknowledged writes a power loss lost.
func ackedSurvive(t *testing.T, bug variant.Bug) int {
	fsys := vfs.NewMem()
	s, _ := memStore(t, &kv.Options{FS: variant.Wrap(fsys, bug), SegmentSize: 4 << 10, CheckpointBytes: 16 << 10})
	var mu sync.Mutex
	lost := 0
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				key := fmt.Sprintf("g%d/k%02d", g, i)
				if _, err := s.Put([]byte(key), []byte(strings.Repeat("v", i*7))); err != nil {
					t.Error(err)
					return
				}
				// A writer's open: a read-only one shows only what a
				// record claims durable, and nothing claims the last group.
				crashed := fsys.CrashClone()
				o := kv.Options{FS: crashed}
				r, err := kv.Open("/data", &o)
				if err != nil {
					t.Errorf("recovery after power loss: %v", err)
					return
				}
				if _, err := r.Get([]byte(key)); err != nil {
					mu.Lock()
					lost++
					mu.Unlock()
				}
				r.Close()
			}
		}()
	}
	wg.Wait()
	return lost
}

func TestAckAfterDurable(t *testing.T) {
	if lost := ackedSurvive(t, variant.None); lost != 0 {
		t.Fatalf("%d acknowledged writes lost by a power loss right after their ack", lost)
	}
}

func TestAckAfterDurableCatchesNoSync(t *testing.T) {
	if lost := ackedSurvive(t, variant.NoSync); lost == 0 {
		t.Fatal("the no-sync bug variant lost nothing: the check cannot fail")
	}
}

// TestReadsSeeOnlyDurable blocks the log's sync and checks that a write
// in flight is invisible until it is durable.
func TestReadsSeeOnlyDurable(t *testing.T) {
	h := &hookFS{FS: vfs.NewMem()}
	s, _ := memStore(t, &kv.Options{FS: h})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h.setSync(func(name string) error {
		if strings.Contains(name, "log.") {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	done := make(chan error)
	go func() {
		_, err := s.Put([]byte("k"), []byte("v"))
		done <- err
	}()
	<-entered
	if _, err := s.Get([]byte("k")); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("Get during the sync: %v, want ErrNotFound", err)
	}
	if s.Revision() != 0 {
		t.Errorf("revision %d visible before the sync", s.Revision())
	}
	h.setSync(nil)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get([]byte("k")); err != nil || string(e.Value) != "v" {
		t.Errorf("Get after the ack: %v %v", e, err)
	}
}

// TestFailStop fails one sync: that write and every later one fail with
// ErrFailed, reads go on, and a reopen recovers every acknowledged write.
func TestFailStop(t *testing.T) {
	mem := vfs.NewMem()
	h := &hookFS{FS: mem}
	s, _ := memStore(t, &kv.Options{FS: h})
	for i := range 5 {
		if _, err := s.Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	eio := errors.New("injected EIO")
	h.setSync(func(name string) error {
		if strings.Contains(name, "log.") {
			return eio
		}
		return nil
	})
	_, err := s.Put([]byte("lost"), []byte("v"))
	if !errors.Is(err, kv.ErrFailed) || !errors.Is(err, eio) {
		t.Fatalf("Put with a failing sync: %v, want ErrFailed wrapping the cause", err)
	}
	h.setSync(nil)
	if _, err := s.Put([]byte("after"), []byte("v")); !errors.Is(err, kv.ErrFailed) {
		t.Fatalf("Put after a failed sync: %v, want ErrFailed (no retry)", err)
	}
	if _, err := s.Get([]byte("k1")); err != nil {
		t.Errorf("Get after fail-stop: %v", err)
	}
	if st := s.Stats(); st.Failed == nil {
		t.Error("Stats.Failed not set")
	}
	s.Close()
	r := reopen(t, mem.CrashClone(), kv.Options{})
	for i := range 5 {
		if _, err := r.Get(fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Errorf("acknowledged k%d lost: %v", i, err)
		}
	}
}

func TestLocked(t *testing.T) {
	mem := vfs.NewMem()
	s, _ := memStore(t, &kv.Options{FS: mem})
	_, err := kv.Open("/data", &kv.Options{FS: mem})
	var le *kv.LockedError
	if !errors.Is(err, kv.ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if le.PID != os.Getpid() {
		t.Errorf("holder pid %d, want %d", le.PID, os.Getpid())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = kv.OpenContext(ctx, "/data", &kv.Options{FS: mem, WaitForLock: true})
	if !errors.Is(err, kv.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Open: %v", err)
	}
	// A waiting Open gets the lock when the holder closes.
	go func() { time.Sleep(20 * time.Millisecond); s.Close() }()
	s2, err := kv.OpenContext(context.Background(), "/data", &kv.Options{FS: mem, WaitForLock: true})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

func TestClose(t *testing.T) {
	s, _ := memStore(t, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Put([]byte("k"), nil); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := s.Checkpoint(); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Checkpoint after Close: %v", err)
	}
}

func TestOperations(t *testing.T) {
	s, _ := memStore(t, nil)
	k := []byte("k")
	r1, err := s.Put(k, []byte("a"))
	if err != nil || r1 != 1 {
		t.Fatalf("Put: %d %v", r1, err)
	}
	r2, _ := s.Put(k, []byte("b"))
	e, _ := s.Get(k)
	want := kv.Entry{Key: k, Value: []byte("b"), CreateRev: 1, ModRev: 2, Version: 2}
	if d := cmp.Diff(want, e); d != "" || r2 != 2 {
		t.Errorf("after two puts (-want +got):\n%s", d)
	}
	if _, err := s.Delete([]byte("missing")); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if r, _ := s.Delete(k); r != 3 {
		t.Errorf("Delete at revision %d, want 3", r)
	}
	if _, err := s.Get(k); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
	n, r, err := s.Add([]byte("n"), -5)
	if n != -5 || r != 4 || err != nil {
		t.Errorf("Add: %d %d %v", n, r, err)
	}
	if _, _, err := s.Add([]byte("n"), -1<<63); !errors.Is(err, kv.ErrOverflow) {
		t.Errorf("overflowing Add: %v", err)
	}
	s.Put([]byte("s"), []byte("x"))
	if _, _, err := s.Add([]byte("s"), 1); !errors.Is(err, kv.ErrNotInteger) {
		t.Errorf("Add on a string: %v", err)
	}
	if s.Revision() != 5 {
		t.Errorf("revision %d, want 5: failed writes must not use revisions", s.Revision())
	}
	if _, err := s.Put(nil, []byte("x")); !errors.Is(err, kv.ErrInvalid) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := s.Put([]byte("big"), make([]byte, kv.DefaultMaxValueSize+1)); !errors.Is(err, kv.ErrTooLarge) {
		t.Errorf("value over the limit: %v", err)
	}
}

func TestTxn(t *testing.T) {
	s, _ := memStore(t, nil)
	a, b := []byte("a"), []byte("b")
	s.Put(a, []byte("1"))
	tests := []struct {
		name string
		cmp  kv.Compare
		want bool
	}{
		{"value equal", kv.CompareValue(a, kv.Equal, []byte("1")), true},
		{"value not equal", kv.CompareValue(a, kv.NotEqual, []byte("1")), false},
		{"value less", kv.CompareValue(a, kv.Less, []byte("2")), true},
		{"value greater", kv.CompareValue(a, kv.Greater, []byte("2")), false},
		{"absent value not equal", kv.CompareValue(b, kv.NotEqual, []byte("1")), true},
		{"absent value equal", kv.CompareValue(b, kv.Equal, nil), false},
		{"mod rev", kv.CompareModRev(a, kv.Equal, 1), true},
		{"create rev less", kv.CompareCreateRev(a, kv.Less, 1), false},
		{"version", kv.CompareVersion(a, kv.Equal, 1), true},
		{"absent version", kv.CompareVersion(b, kv.Equal, 0), true},
		{"exists", kv.Exists(a), true},
		{"exists absent", kv.Exists(b), false},
		{"absent", kv.Absent(b), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Txn(kv.Txn{If: []kv.Compare{tc.cmp}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Succeeded != tc.want || res.Committed {
				t.Errorf("succeeded %v committed %v, want %v false", res.Succeeded, res.Committed, tc.want)
			}
		})
	}
	// Atomic: a failing op commits nothing.
	res, err := s.Txn(kv.Txn{Then: []kv.Op{kv.PutOp(b, []byte("x")), kv.AddOp(b, 1)}})
	if !errors.Is(err, kv.ErrNotInteger) || res.Committed {
		t.Fatalf("txn with a failing add: %+v %v", res, err)
	}
	if _, err := s.Get(b); !errors.Is(err, kv.ErrNotFound) {
		t.Error("a failed transaction left a write behind")
	}
	// Later ops see earlier ones; one revision for all.
	res, err = s.Txn(kv.Txn{Then: []kv.Op{kv.PutOp(b, []byte("10")), kv.AddOp(b, 5), kv.DeleteOp(a)}})
	if err != nil || !res.Committed {
		t.Fatal(res, err)
	}
	e, _ := s.Get(b)
	if string(e.Value) != "15" || e.ModRev != res.Revision || e.CreateRev != res.Revision {
		t.Errorf("b = %+v at revision %d", e, res.Revision)
	}
}

// TestConcurrentCAS increments a counter by compare-and-set from many
// goroutines: compares see every write committed before them, including
// those of the same group commit, so no increment is lost.
func TestConcurrentCAS(t *testing.T) {
	s, _ := memStore(t, nil)
	k := []byte("ctr")
	s.Put(k, []byte("0"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				e, _ := s.Get(k)
				n, _ := fmt.Sscan(string(e.Value), new(int))
				_ = n
				var v int
				fmt.Sscan(string(e.Value), &v)
				res, err := s.Txn(kv.Txn{
					If:   []kv.Compare{kv.CompareModRev(k, kv.Equal, e.ModRev)},
					Then: []kv.Op{kv.PutOp(k, fmt.Appendf(nil, "%d", v+1))},
				})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Succeeded {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	e, _ := s.Get(k)
	if string(e.Value) != fmt.Sprint(wins) {
		t.Errorf("counter %s after %d successful CAS", e.Value, wins)
	}
}

func TestFenced(t *testing.T) {
	s, _ := memStore(t, nil)
	lock := []byte("lock")
	tok, _ := s.Put(lock, []byte("a"))
	a := s.Fenced(kv.Fence{Key: lock, Token: tok})
	if _, err := a.Put([]byte("x"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	// The holder may update its own lock record: the create revision stays.
	s.Put(lock, []byte("a, renewed"))
	if _, _, err := a.Add([]byte("n"), 1); err != nil {
		t.Fatalf("write after renewal: %v", err)
	}
	byMod := s.Fenced(kv.Fence{Key: lock, Token: tok, By: kv.FenceModRev})
	if _, err := byMod.Put([]byte("x"), []byte("2")); !errors.Is(err, kv.ErrFenced) {
		t.Errorf("mod-revision fence after renewal: %v", err)
	}
	s.Delete(lock)
	if _, err := a.Put([]byte("x"), []byte("3")); !errors.Is(err, kv.ErrFenced) {
		t.Errorf("fenced write after the lock was released: %v", err)
	}
	s.Put(lock, []byte("b"))
	rev := s.Revision()
	if _, err := a.Delete([]byte("x")); !errors.Is(err, kv.ErrFenced) {
		t.Errorf("fenced delete by the old holder: %v", err)
	}
	if res, err := a.Txn(kv.Txn{Then: []kv.Op{kv.PutOp([]byte("x"), []byte("4"))}}); !errors.Is(err, kv.ErrFenced) || res.Committed {
		t.Errorf("fenced txn by the old holder: %+v %v", res, err)
	}
	if s.Revision() != rev {
		t.Error("a fenced write committed a record")
	}
	if e, _ := s.Get([]byte("x")); string(e.Value) != "1" {
		t.Errorf("x = %q, want 1", e.Value)
	}
}

func TestCheckpointAndReopen(t *testing.T) {
	const retain = 8 << 10
	s, mem := memStore(t, &kv.Options{SegmentSize: 2 << 10, CheckpointBytes: 8 << 10, NoPreallocate: true, LogRetention: retain})
	want := map[string]string{}
	for i := range 400 {
		k := fmt.Sprintf("k%03d", i%97)
		if i%5 == 4 {
			n, _, err := s.Add([]byte("ctr"), int64(i))
			if err != nil {
				t.Fatal(err)
			}
			want["ctr"] = fmt.Sprint(n)
			continue
		}
		v := strings.Repeat("x", i%50)
		if _, err := s.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Checkpoints < 2 {
		t.Errorf("%d checkpoints, want background ones too", st.Checkpoints)
	}
	// The checkpoint deletes the segments it covers but the newest that
	// the retention keeps: at least retain bytes of them, and less than
	// retain without the oldest kept.
	names, _ := mem.List("/data")
	var sizes []int64
	for _, n := range names {
		if strings.HasPrefix(n, "log.") {
			fi, err := mem.Stat("/data/" + n)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, fi.Size())
		}
	}
	var kept int64
	for _, sz := range sizes[:len(sizes)-1] {
		kept += sz
	}
	if len(sizes) < 2 || kept < retain || kept-sizes[0] >= retain || slices.Contains(names, "log.000001") {
		t.Errorf("files after a checkpoint: %v of sizes %v; want the covered segments deleted but %d bytes or one segment more", names, sizes, retain)
	}
	rev := s.Revision()
	if d := cmp.Diff(want, dumpStore(s)); d != "" {
		t.Fatalf("map (-want +got):\n%s", d)
	}
	r := reopen(t, mem.CrashClone(), kv.Options{})
	if d := cmp.Diff(want, dumpStore(r)); d != "" {
		t.Errorf("after power loss (-want +got):\n%s", d)
	}
	if r.Revision() != rev {
		t.Errorf("revision %d after reopen, want %d", r.Revision(), rev)
	}
	if st := r.Stats(); st.RecoveryReplayed != 0 || !st.RecoverySnapshot {
		t.Errorf("reopen after checkpoint replayed %d records", st.RecoveryReplayed)
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	s, _ := kv.Open(dir, nil)
	s.Put([]byte("k"), []byte("v"))
	s.Close()
	before, _ := os.ReadDir(dir)
	r, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Put([]byte("k"), nil); !errors.Is(err, kv.ErrReadOnly) {
		t.Errorf("Put on read-only: %v", err)
	}
	if e, err := r.Get([]byte("k")); err != nil || string(e.Value) != "v" {
		t.Errorf("Get: %v %v", e, err)
	}
	after, _ := os.ReadDir(dir)
	if len(before) != len(after) {
		t.Errorf("read-only open changed the directory: %v -> %v", before, after)
	}
	// A writer and a read-only reader may coexist.
	w, err := kv.Open(dir, nil)
	if err == nil {
		w.Close()
	} else if !errors.Is(err, kv.ErrLocked) {
		t.Error(err)
	}
}

// TestTreeKeepsUp: under the default sync mode the flusher keeps the
// ordered tree up with the writes, so that a checkpoint or a scan does not
// insert a whole log's changes while it holds the store (with 64 MiB of
// puts waiting, a checkpoint's clone held every reader and writer for a
// long time; bench/RESULTS.md has the figure).
func TestTreeKeepsUp(t *testing.T) {
	s, _ := memStore(t, &kv.Options{CheckpointBytes: -1})
	const n = 2000
	for i := range n {
		if _, err := s.Put(fmt.Appendf(nil, "k%05d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// The last put's change may wait for the next group's sync.
	deadline := time.Now().Add(5 * time.Second)
	for kv.Unflushed(s) > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d puts' changes still wait for the ordered tree", kv.Unflushed(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLockedNamesHolderOS: on the host's file system a second open names
// the holder, a writer. On Linux the kernel's table of locks names it and
// LOCK stays empty (an open empties the pid an older build left there,
// which names no one); elsewhere LOCK holds the writer's pid. A read-only
// store holds no lock: a writer opens beside it.
func TestLockedNamesHolderOS(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, kv.LockName)
	wantLock := fmt.Sprintf("%-10d\n", os.Getpid())
	if vfs.NamesLockHolders(vfs.OS) {
		wantLock = ""
	}
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A stale pid, as an older build wrote it.
	if err := os.WriteFile(lock, []byte("4194303   \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(lock); err != nil || string(b) != wantLock {
		t.Errorf("LOCK after an open: %q, %v; want %q", b, err, wantLock)
	}
	var le *kv.LockedError
	_, err = kv.Open(dir, nil)
	if !errors.As(err, &le) {
		t.Fatalf("second open: %v, want a LockedError", err)
	}
	if want := os.Getpid(); le.PID != want {
		t.Errorf("second open: %v, want it to name pid %d", err, want)
	}
	s.Close()

	r, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if w := r.Stats().RecoveryWriter; w != 0 {
		t.Errorf("a read-only open with no writer names writer %d", w)
	}
	w, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatalf("a writer's open beside a read-only store: %v", err)
	}
	w.Close()
}

// TestLockHoldsPID: LOCK holds the pid at a fixed width, so that the
// next open overwrites it in place; a LOCK of any other size (an older
// build's, or garbage) is cut to it; and the pid still reads back in a
// LockedError.
func TestLockHoldsPID(t *testing.T) {
	mem := vfs.NewMem()
	want := fmt.Sprintf("%-10d\n", os.Getpid())
	for _, before := range []string{"", "12\n", "a pid from a much longer file than this one\n"} {
		if before != "" {
			f, err := mem.OpenReadWrite("/data/" + kv.LockName)
			if err == nil {
				err = f.Truncate(0)
			}
			if err == nil {
				_, err = f.WriteAt([]byte(before), 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		s, err := kv.Open("/data", &kv.Options{FS: mem})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := vfs.ReadFile(mem, "/data/"+kv.LockName); err != nil || string(b) != want {
			t.Errorf("LOCK after an open over %q: %q, %v; want %q", before, b, err, want)
		}
		var le *kv.LockedError
		if _, err := kv.Open("/data", &kv.Options{FS: mem}); !errors.As(err, &le) || le.PID != os.Getpid() {
			t.Errorf("second open: %v, want a LockedError naming pid %d", err, os.Getpid())
		}
		s.Close()
	}
}
