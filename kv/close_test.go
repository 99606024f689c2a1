package kv_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// closedStore returns a store holding key "k" that has been closed: a
// writer, a read-only one, or a writer that fail-stopped before Close.
func closedStore(tb testing.TB, kind string) *kv.Store {
	tb.Helper()
	mem := vfs.NewMem()
	h := &hookFS{FS: mem}
	s, _ := memStore(tb, &kv.Options{FS: h})
	if _, err := s.Put([]byte("k"), []byte("v")); err != nil {
		tb.Fatal(err)
	}
	switch kind {
	case "read-only":
		if err := s.Close(); err != nil {
			tb.Fatal(err)
		}
		s = reopen(tb, mem, kv.Options{ReadOnly: true})
	case "failed":
		h.setSync(func(name string) error {
			if strings.Contains(name, "log.") {
				return &os.PathError{Op: "fdatasync", Path: name, Err: syscall.EIO}
			}
			return nil
		})
		if _, err := s.Put([]byte("x"), []byte("v")); !errors.Is(err, kv.ErrFailed) {
			tb.Fatalf("Put with a failing sync: %v", err)
		}
	}
	if _, err := s.Get([]byte("k")); err != nil {
		tb.Fatalf("Get before Close: %v", err)
	}
	s.Close()
	return s
}

// TestClosedRefuses: after Close every method of the store returns
// ErrClosed, whatever the store was (a writer, read-only, failed):
// reads included, which used to serve the map after Close.
func TestClosedRefuses(t *testing.T) {
	fence := kv.Fence{Key: []byte("k"), Token: 1}
	calls := []struct {
		name string
		call func(s *kv.Store) error
	}{
		{"Get", func(s *kv.Store) error { _, err := s.Get([]byte("k")); return err }},
		{"Get missing", func(s *kv.Store) error { _, err := s.Get([]byte("missing")); return err }},
		{"Scan", func(s *kv.Store) error {
			for e := range s.Scan(nil, nil) {
				return errors.New("Scan yielded " + string(e.Key))
			}
			return kv.ErrClosed
		}},
		{"ScanPrefix", func(s *kv.Store) error {
			for e := range s.ScanPrefix([]byte("k")) {
				return errors.New("ScanPrefix yielded " + string(e.Key))
			}
			return kv.ErrClosed
		}},
		{"ScanErr", func(s *kv.Store) error {
			var errs []error
			for e, err := range s.ScanErr(nil, nil) {
				if err == nil {
					return fmt.Errorf("ScanErr yielded %q", e.Key)
				}
				errs = append(errs, err)
			}
			if len(errs) != 1 {
				return fmt.Errorf("ScanErr yielded %d errors, want 1", len(errs))
			}
			return errs[0]
		}},
		{"ScanPrefixErr", func(s *kv.Store) error {
			for e, err := range s.ScanPrefixErr([]byte("k")) {
				if err == nil {
					return fmt.Errorf("ScanPrefixErr yielded %q", e.Key)
				}
				return err
			}
			return errors.New("ScanPrefixErr yielded nothing")
		}},
		{"Err", func(s *kv.Store) error { return s.Err() }},
		{"Len", func(s *kv.Store) error {
			if n := s.Len(); n != 0 {
				return fmt.Errorf("Len served %d keys", n)
			}
			return kv.ErrClosed
		}},
		{"Revision", func(s *kv.Store) error {
			if r := s.Revision(); r != 0 {
				return fmt.Errorf("Revision served %d", r)
			}
			return kv.ErrClosed
		}},
		{"Stats", func(s *kv.Store) error {
			if d := cmp.Diff(kv.Stats{}, s.Stats()); d != "" {
				return errors.New("Stats served (-zero +got):\n" + d)
			}
			return kv.ErrClosed
		}},
		{"Put", func(s *kv.Store) error { _, err := s.Put([]byte("k"), []byte("w")); return err }},
		{"Delete", func(s *kv.Store) error { _, err := s.Delete([]byte("k")); return err }},
		{"Add", func(s *kv.Store) error { _, _, err := s.Add([]byte("n"), 1); return err }},
		{"Txn", func(s *kv.Store) error {
			_, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Exists([]byte("k"))}, Then: []kv.Op{kv.DeleteOp([]byte("k"))}})
			return err
		}},
		{"empty Txn", func(s *kv.Store) error { _, err := s.Txn(kv.Txn{}); return err }},
		{"Txn invalid", func(s *kv.Store) error { _, err := s.Txn(kv.Txn{Then: []kv.Op{kv.PutOp(nil, nil)}}); return err }},
		{"Fenced Put", func(s *kv.Store) error { _, err := s.Fenced(fence).Put([]byte("f"), nil); return err }},
		{"Fenced Delete", func(s *kv.Store) error { _, err := s.Fenced(fence).Delete([]byte("k")); return err }},
		{"Fenced Add", func(s *kv.Store) error { _, _, err := s.Fenced(fence).Add([]byte("n"), 1); return err }},
		{"Fenced Txn", func(s *kv.Store) error {
			_, err := s.Fenced(fence).Txn(kv.Txn{Then: []kv.Op{kv.PutOp([]byte("f"), nil)}})
			return err
		}},
		{"Submit", func(s *kv.Store) error { _, _, err := s.Submit(kv.PutOp([]byte("k"), nil)).Wait(); return err }},
		{"Sync", func(s *kv.Store) error { return s.Sync() }},
		{"Checkpoint", func(s *kv.Store) error { return s.Checkpoint() }},
	}
	for _, kind := range []string{"writer", "read-only", "failed"} {
		t.Run(kind, func(t *testing.T) {
			s := closedStore(t, kind)
			for _, c := range calls {
				if err := c.call(s); !errors.Is(err, kv.ErrClosed) {
					t.Errorf("%s after Close: %v, want ErrClosed", c.name, err)
				}
			}
		})
	}
}

// TestScanErrAndErr: on an open store ScanErr yields Scan's entries with
// nil errors, and a Close during the loop does not end it (the view was
// taken when it started); Err is nil while the store serves, matches
// ErrFailed after a failed sync, and is ErrClosed after Close.
func TestScanErrAndErr(t *testing.T) {
	h := &hookFS{FS: vfs.NewMem()}
	s, _ := memStore(t, &kv.Options{FS: h})
	for _, k := range []string{"c", "a", "b"} {
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err of an open store: %v", err)
	}
	var keys []string
	for e, err := range s.ScanErr(nil, nil) {
		if err != nil {
			t.Fatalf("ScanErr: %v", err)
		}
		keys = append(keys, string(e.Key))
		if len(keys) == 1 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, keys); diff != "" {
		t.Errorf("ScanErr with a Close during the loop (-want +got):\n%s", diff)
	}
	if err := s.Err(); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Err after Close: %v", err)
	}

	fh := &hookFS{FS: vfs.NewMem()}
	f, _ := memStore(t, &kv.Options{FS: fh})
	fh.setSync(func(name string) error {
		if strings.Contains(name, "log.") {
			return syscall.EIO
		}
		return nil
	})
	if _, err := f.Put([]byte("k"), nil); !errors.Is(err, kv.ErrFailed) {
		t.Fatalf("Put with a failing sync: %v", err)
	}
	if err := f.Err(); !errors.Is(err, kv.ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Errorf("Err of a failed store: %v, want ErrFailed wrapping the EIO", err)
	}
}

// TestConcurrentClose: a Close called while another is closing the store
// returns only once the store is closed, its log synced and its lock
// released, so that an Open right after it succeeds; and it returns
// what the first Close returned. (It used to return nil at once.)
func TestConcurrentClose(t *testing.T) {
	tests := []struct {
		name string
		sync error // what the held sync of the first Close returns
	}{
		{name: "sync succeeds"},
		{name: "sync fails", sync: syscall.EIO},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			h := &hookFS{FS: mem}
			// Under Never the write is not synced until Close syncs the log.
			s, _ := memStore(t, &kv.Options{FS: h, Sync: kv.Never})
			if _, err := s.Put([]byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			h.setSync(func(name string) error {
				if !strings.Contains(name, "log.") {
					return nil
				}
				held := false
				once.Do(func() { held = true })
				if !held {
					return nil
				}
				close(entered)
				<-release
				return tc.sync
			})
			first, second := make(chan error, 1), make(chan error, 1)
			go func() { first <- s.Close() }()
			<-entered // the first Close is syncing the log
			go func() { second <- s.Close() }()
			select {
			case err := <-second:
				_, oerr := kv.Open("/data", &kv.Options{FS: mem})
				close(release)
				t.Fatalf("a second Close returned %v while the first was still syncing the log; an Open right after it: %v", err, oerr)
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			err2 := <-second
			// The store is closed once any Close returned: its lock is free.
			r, err := kv.Open("/data", &kv.Options{FS: mem})
			if err != nil {
				t.Fatalf("Open right after the second Close returned: %v", err)
			}
			r.Close()
			err1 := <-first
			if !errors.Is(err1, tc.sync) || (tc.sync == nil) != (err1 == nil) {
				t.Errorf("first Close: %v, want %v", err1, tc.sync)
			}
			if err2 != err1 {
				t.Errorf("second Close: %v, want the first's %v", err2, err1)
			}
			if err := s.Close(); err != err1 {
				t.Errorf("a third Close: %v, want the first's %v", err, err1)
			}
		})
	}
}

// TestCloseCommitsInGroups: the writes queued when Close is called are
// committed in groups, as the running store commits them, not with one
// fdatasync each. The committer is held in the sync of a first write
// while the others queue and Close starts; its next step is then either
// the queue or Close, at random, so the run is repeated: each must take
// a couple of syncs for all the queued writes, not one each.
func TestCloseCommitsInGroups(t *testing.T) {
	const trials, queued = 10, 511
	for trial := range trials {
		mem := vfs.NewMem()
		h := &hookFS{FS: mem}
		s, _ := memStore(t, &kv.Options{FS: h})
		var mu sync.Mutex
		syncs := 0
		entered, release := make(chan struct{}), make(chan struct{})
		h.setSync(func(name string) error {
			if !strings.Contains(name, "log.") {
				return nil
			}
			mu.Lock()
			syncs++
			first := syncs == 1
			mu.Unlock()
			if first {
				close(entered)
				<-release
			}
			return nil
		})
		x := s.Submit(kv.PutOp([]byte("x"), []byte("X")))
		<-entered
		var ps []*kv.Pending
		for i := range queued {
			ps = append(ps, s.Submit(kv.PutOp(fmt.Appendf(nil, "k%03d", i), []byte("v"))))
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		for !errors.Is(s.Err(), kv.ErrClosed) {
			time.Sleep(50 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond) // for Close to signal the committer
		close(release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if _, _, err := x.Wait(); err != nil {
			t.Fatal(err)
		}
		for i, p := range ps {
			if _, _, err := p.Wait(); err != nil {
				t.Fatalf("write %d queued before Close: %v", i, err)
			}
		}
		mu.Lock()
		n := syncs - 1 // after the held one
		mu.Unlock()
		if n > 2 {
			t.Fatalf("trial %d: %d queued writes took %d log syncs at Close, want them grouped (at most 2)", trial, queued, n)
		}
		r := reopen(t, mem.CrashClone(), kv.Options{})
		if got := r.Len(); got != queued+1 {
			t.Fatalf("trial %d: %d keys after a power loss, want %d", trial, got, queued+1)
		}
	}
}
