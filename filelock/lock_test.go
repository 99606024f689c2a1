package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
)

func openLocker(t testing.TB, dir string, opts ...Option) *Locker {
	t.Helper()
	l, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAcquire(t testing.TB, l *Locker, name string) *Holder {
	t.Helper()
	h, err := l.TryAcquire(name)
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", name, err)
	}
	return h
}

// die makes h look like a holder whose process died: its holder file is
// closed (the kernel lets go of the lock) and nothing is released.
func die(h *Holder) {
	if h.file != nil {
		h.file.Close()
	}
	h.done = true
}

func TestAcquireRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l := openLocker(t, dir)
	h := mustAcquire(t, l, "job")
	if h.Token() <= 0 {
		t.Fatalf("token %d", h.Token())
	}
	_, err := l.TryAcquire("job")
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryAcquire: %v, want a LockedError", err)
	}
	if len(le.Holders) != 1 || le.Holders[0].PID != os.Getpid() || le.Holders[0].Token != h.Token() || !le.Holders[0].Alive {
		t.Fatalf("LockedError names %+v", le.Holders)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); !errors.Is(err, ErrReleased) {
		t.Fatalf("second Release: %v", err)
	}
	h2 := mustAcquire(t, l, "job")
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after %d", h2.Token(), h.Token())
	}
	h2.Release()
	ents, _ := os.ReadDir(filepath.Join(dir, HolderDirName))
	if len(ents) != 0 {
		t.Fatalf("holder files left: %v", ents)
	}
}

func TestTakeoverOfDeadHolder(t *testing.T) {
	for _, st := range []Strategy{KernelFirst, PIDFirst, PIDOnly} {
		t.Run(st.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := openLocker(t, dir, WithStrategy(st))
			h := mustAcquire(t, l, "job")
			die(h)
			h2, err := l.TryAcquire("job")
			if st != KernelFirst {
				// This process is the holder's pid, alive: the PID
				// strategies cannot tell it died.
				if !errors.Is(err, ErrLocked) {
					t.Fatalf("%v: TryAcquire: %v, want ErrLocked", st, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h2.Token() <= h.Token() {
				t.Fatalf("token %d after %d", h2.Token(), h.Token())
			}
			if err := h.ReleaseContext(context.Background()); !errors.Is(err, ErrReleased) {
				t.Fatal(err)
			}
		})
	}
}

func TestReleaseAfterTakeover(t *testing.T) {
	dir := t.TempDir()
	l := openLocker(t, dir, WithStrategy(TimeOnly), WithStaleAfter(50*time.Millisecond))
	a := mustAcquire(t, l, "job")
	lost := a.Lost()
	time.Sleep(80 * time.Millisecond)
	b := mustAcquire(t, l, "job")
	if err := a.Release(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Release of the holder taken over: %v, want ErrLockLost", err)
	}
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("Lost not closed")
	}
	if err := a.Extend(context.Background()); !errors.Is(err, ErrReleased) {
		t.Fatalf("Extend after Release: %v", err)
	}
	infos, err := l.List(context.Background())
	if err != nil || len(infos) != 1 || infos[0].Token != b.Token() {
		t.Fatalf("after the old holder's Release: %+v %v, want b's lock (token %d)", infos, err, b.Token())
	}
	if _, err := a.Put(context.Background(), "k", []byte("a")); !errors.Is(err, kv.ErrFenced) || !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced put of the old holder: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestSlots(t *testing.T) {
	dir := t.TempDir()
	l := openLocker(t, dir, WithSlots(3))
	var hs []*Holder
	seen := map[int64]bool{}
	for range 3 {
		h := mustAcquire(t, l, "pool")
		if seen[h.Token()] {
			t.Fatalf("token %d twice", h.Token())
		}
		seen[h.Token()] = true
		hs = append(hs, h)
	}
	if _, err := l.TryAcquire("pool"); !errors.Is(err, ErrLocked) {
		t.Fatalf("4th of 3: %v", err)
	}
	l2 := openLocker(t, dir, WithSlots(2))
	var se *SlotsError
	if _, err := l2.TryAcquire("pool"); !errors.As(err, &se) || se.Have != 3 || se.Want != 2 {
		t.Fatalf("another slot count: %v", err)
	}
	hs[1].Release()
	h := mustAcquire(t, l, "pool")
	if h.Slot() != 1 {
		t.Fatalf("slot %d, want the freed 1", h.Slot())
	}
	for _, h := range append(hs, h) {
		h.Release()
	}
	// With every holder gone, another count may take the lock.
	h2 := mustAcquire(t, l2, "pool")
	h2.Release()
}

func TestFencedWriter(t *testing.T) {
	dir := t.TempDir()
	l := openLocker(t, dir)
	h := mustAcquire(t, l, "job")
	fw := l.Fenced("job", h.Token())
	if _, err := fw.Put(context.Background(), "data", []byte("1")); err != nil {
		t.Fatal(err)
	}
	stale := l.Fenced("job", h.Token()-1)
	if _, err := stale.Put(context.Background(), "data", []byte("2")); !errors.Is(err, kv.ErrFenced) {
		t.Fatalf("stale token: %v", err)
	}
	h.Release()
	if _, err := fw.Put(context.Background(), "data", []byte("3")); !errors.Is(err, ErrFenced) {
		t.Fatalf("after release: %v", err)
	}
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if e, _ := s.Get([]byte("data")); string(e.Value) != "1" {
		t.Fatalf("data = %q", e.Value)
	}
}

func TestExtendKeepsTimeOnlyHolder(t *testing.T) {
	dir := t.TempDir()
	stale := 150 * time.Millisecond
	l := openLocker(t, dir, WithStrategy(TimeOnly), WithStaleAfter(stale))
	h := mustAcquire(t, l, "job")
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		if err := h.Extend(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryAcquire("job"); !errors.Is(err, ErrLocked) {
			t.Fatalf("a holder that extends was taken: %v", err)
		}
		time.Sleep(stale / 3)
	}
	time.Sleep(stale + 20*time.Millisecond)
	h2 := mustAcquire(t, l, "job")
	if err := h.Extend(context.Background()); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Extend after the takeover: %v", err)
	}
	h2.Release()
}

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	l := openLocker(t, dir)
	a := mustAcquire(t, l, "a")
	b := mustAcquire(t, l, "b")
	die(a)
	rm, err := l.Sweep(context.Background())
	if err != nil || len(rm) != 1 || rm[0].Name != "a" || rm[0].Token != a.Token() {
		t.Fatalf("Sweep: %+v %v", rm, err)
	}
	infos, _ := l.List(context.Background())
	if len(infos) != 1 || infos[0].Name != "b" {
		t.Fatalf("left: %+v", infos)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, HolderDirName))
	if len(ents) != 1 {
		t.Fatalf("holder files: %v", ents)
	}
	b.Release()
}

// TestJudge crafts markers: the PID strategies take over a live pid of
// another start time or boot, and keep one with the right ones.
func TestJudge(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	self := Marker{PID: os.Getpid(), PIDStart: selfStart(), BootID: bootID(), Host: host, Renewed: time.Now()}
	tests := []struct {
		name   string
		change func(*Marker)
		alive  bool
	}{
		{"self", func(*Marker) {}, true},
		{"other start time", func(m *Marker) { m.PIDStart++ }, false},
		{"other boot", func(m *Marker) { m.BootID = "00000000-dead-beef-0000-000000000000" }, false},
		{"no such pid", func(m *Marker) { m.PID = 1 << 30 }, false},
		{"unlocked holder file", func(m *Marker) {
			m.HolderFile = "x.holder"
			os.WriteFile(filepath.Join(dir, HolderDirName, "x.holder"), nil, 0o600)
		}, false},
	}
	for _, st := range []Strategy{KernelFirst, PIDFirst, PIDOnly} {
		l := openLocker(t, dir, WithStrategy(st))
		for _, tc := range tests {
			m := self
			tc.change(&m)
			want := tc.alive
			if tc.name == "unlocked holder file" && st != KernelFirst {
				want = true // the PID strategies do not look at files
			}
			if got, why := l.judge(&m, time.Now()); got != want {
				t.Errorf("%v, %s: alive %v (%s), want %v", st, tc.name, got, why, want)
			}
		}
	}
}

func TestCorruptStoreFailsClosed(t *testing.T) {
	dir := t.TempDir()
	l := openLocker(t, dir)
	h := mustAcquire(t, l, "job")
	h.Release()
	for range 3 {
		h := mustAcquire(t, l, "job")
		h.Release()
	}
	names, _ := filepath.Glob(filepath.Join(dir, "log.*"))
	snap := filepath.Join(dir, "snapshot")
	target := snap
	if len(names) > 0 {
		if fi, _ := os.Stat(names[0]); fi.Size() > 0 {
			target = names[0]
		}
	}
	b, err := os.ReadFile(target)
	if err != nil || len(b) < 40 {
		t.Fatalf("%s: %v, %d bytes", target, err, len(b))
	}
	b[30] ^= 0xff
	os.WriteFile(target, b, 0o600)
	if _, err := l.TryAcquire("job"); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("TryAcquire on a corrupt store: %v, want the store's error", err)
	}
	_ = strconv.Itoa
}

func TestNames(t *testing.T) {
	l := openLocker(t, t.TempDir())
	for _, n := range []string{"", ".x", "a/b", "a b", string(make([]byte, 200))} {
		if _, err := l.TryAcquire(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q: %v", n, err)
		}
	}
	if _, err := Open(t.TempDir(), WithStrategy(TimeOnly)); !errors.Is(err, ErrInvalid) {
		t.Errorf("time-only without a window: %v", err)
	}
}

// TestNewStore runs the lock on a store this process keeps open.
func TestNewStore(t *testing.T) {
	s, err := kv.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	h := mustAcquire(t, l, "job")
	done := make(chan *Holder)
	go func() {
		h2, err := l.Acquire(context.Background(), "job")
		if err != nil {
			t.Error(err)
		}
		done <- h2
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := s.Fenced(mustFence(t, s, "job", h.Token())).Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	h.Release()
	h2 := <-done
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after %d", h2.Token(), h.Token())
	}
	if _, err := s.Fenced(mustFence(t, s, "job", h.Token())).Put([]byte("k"), []byte("v")); !errors.Is(err, kv.ErrFenced) {
		t.Fatalf("stale StoreFence: %v", err)
	}
	h2.Release()
	var _ lockstore.Backend = StoreBackend(s)
}

func mustFence(t testing.TB, s *kv.Store, name string, token int64) kv.Fence {
	f, err := StoreFence(s, name, token)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOpenRace opens a missing directory from many goroutines at once,
// as many processes starting together do: each Open succeeds.
func TestOpenRace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := Open(dir)
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// hookBackend runs before each Txn once, between a caller's read and its
// write.
type hookBackend struct {
	lockstore.Backend
	before func()
}

func (h *hookBackend) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	return h.Backend.Txn(ctx, t)
}

// TestSweepJudgedStale: a takeover commits between the sweep's judgment
// of a dead holder and its delete. The delete, conditional on the
// revision judged, fails, and the new holder's key stays.
func TestSweepJudgedStale(t *testing.T) {
	s, err := kv.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	dead := mustAcquire(t, l, "job")
	die(dead)
	var taker *Holder
	hb := &hookBackend{Backend: StoreBackend(s), before: func() { taker = mustAcquire(t, l, "job") }}
	sweeper, err := NewBackend(hb, l.holderDir)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := sweeper.Sweep(context.Background())
	if err != nil || len(removed) != 0 {
		t.Fatalf("Sweep: removed %+v, %v; want nothing", removed, err)
	}
	e, err := s.Get([]byte(taker.Key()))
	if err != nil || int64(e.CreateRev) != taker.Token() {
		t.Fatalf("the takeover's key: %v, create revision %d, want %d", err, e.CreateRev, taker.Token())
	}
	taker.Release()
}
