package recovery_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// pauseFS is the file system of a live writer whose next write to one
// file waits: armed with a file name, the first WriteAt to it calls
// paused, then waits until resume is closed. It lets a test stop a
// writer between two of its steps (a rotation between its create of the
// next segment and its seal of this one) while a reader reads.
type pauseFS struct {
	vfs.FS
	mu     sync.Mutex
	file   string
	paused chan struct{}
	resume chan struct{}
}

func (p *pauseFS) arm(file string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.file, p.paused, p.resume = file, make(chan struct{}), make(chan struct{})
}

func (p *pauseFS) Create(name string) (vfs.File, error) {
	f, err := p.FS.Create(name)
	return p.wrap(name, f), err
}

func (p *pauseFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name)
	return p.wrap(name, f), err
}

func (p *pauseFS) wrap(name string, f vfs.File) vfs.File {
	if f == nil {
		return nil
	}
	return &pauseFile{File: f, fs: p, name: name}
}

type pauseFile struct {
	vfs.File
	fs   *pauseFS
	name string
}

func (f *pauseFile) WriteAt(b []byte, off int64) (int, error) {
	p := f.fs
	p.mu.Lock()
	fire := p.file == f.name
	if fire {
		p.file = ""
	}
	paused, resume := p.paused, p.resume
	p.mu.Unlock()
	if fire {
		close(paused)
		<-resume
	}
	return f.File.WriteAt(b, off)
}

// hookFS is a reader's file system that runs hook before its at-th open
// of file (counting from 1).
type hookFS struct {
	vfs.FS
	mu    sync.Mutex
	file  string
	at    int
	opens int
	hook  func()
}

func (h *hookFS) Open(name string) (vfs.File, error) {
	h.mu.Lock()
	if name == h.file {
		h.opens++
	}
	fire := h.hook != nil && name == h.file && h.opens == h.at
	hook := h.hook
	if fire {
		h.hook = nil
	}
	h.mu.Unlock()
	if fire {
		hook()
	}
	return h.FS.Open(name)
}

// appendRec appends put(rev) as one record.
func appendRec(tb testing.TB, w *wal.Writer, rev record.Revision) {
	tb.Helper()
	r := put(rev, string(rune('a'+rev-1)), "v")
	if _, err := w.Append(record.Append(nil, &r)); err != nil {
		tb.Fatal(err)
	}
}

// TestReadOnlyBesideRotation (item 6 of issue 39): a reader lists a
// directory while its writer is in the middle of a rotation (the next
// segment created, this one not sealed yet), reads this segment unsealed,
// and then, before it opens the next, the writer seals this one and
// commits records in the next. The reader saw a log no single moment
// held: a segment not sealed followed by one that holds records, or a
// revision gap where it left out the last records of the first as not
// yet synced and then read the next ones. Neither Recover nor Check may
// call it damage; each reads it again and finds it whole.
func TestReadOnlyBesideRotation(t *testing.T) {
	// markedThenTwo appends a record, syncs and marks it, then appends
	// two more that no record claims synced.
	markedThenTwo := func(tb testing.TB, w *wal.Writer) record.Revision {
		appendRec(tb, w, 1)
		if err := w.Sync(); err != nil {
			tb.Fatal(err)
		}
		if err := w.Mark(); err != nil {
			tb.Fatal(err)
		}
		appendRec(tb, w, 2)
		appendRec(tb, w, 3)
		return 4
	}

	for _, c := range []struct {
		name string
		// before appends the records of the first segment, from
		// revision 1; it returns the next revision.
		before func(tb testing.TB, w *wal.Writer) record.Revision
		keys   int // what the read-only Recover shows
		// The writer goes on before the reader's at-th open of segment
		// seg.
		seg wal.SegmentNum
		at  int
	}{
		{
			// Every record of the first segment claimed synced: the
			// reader finds the first segment unsealed and the next
			// holding a record.
			name: "unsealed before records",
			before: func(tb testing.TB, w *wal.Writer) record.Revision {
				appendRec(tb, w, 1)
				appendRec(tb, w, 2)
				if err := w.Sync(); err != nil {
					tb.Fatal(err)
				}
				if err := w.Mark(); err != nil {
					tb.Fatal(err)
				}
				return 3
			},
			keys: 3,
			seg:  2, at: 1,
		},
		{
			// The last records of the first segment past its synced
			// claim: the reader leaves them out, and then finds the
			// next segment's records vouched for, after a gap (which
			// it reports as the first segment's missing seal).
			name:   "records left out",
			before: markedThenTwo,
			keys:   4,
			seg:    2, at: 1,
		},
		{
			// The writer goes on between the two reads of the first
			// segment (Recover reads it once for its synced claim, and
			// again to replay it): the reader leaves out its last
			// records as past the claim it read first, reads the
			// segment sealed, then the next one's records, after a
			// gap in revisions.
			name:   "revision gap",
			before: markedThenTwo,
			keys:   4,
			seg:    1, at: 2,
		},
	} {
		for _, reader := range []string{"Recover", "Check"} {
			t.Run(c.name+"/"+reader, func(t *testing.T) {
				mem, dir := newDir(t)
				wfs := &pauseFS{FS: mem}
				res, err := recovery.Recover(wfs, dir, recovery.Options{})
				if err != nil {
					t.Fatal(err)
				}
				w := res.Writer
				defer w.Abandon()
				res.Map.Close()
				next := c.before(t, w)

				// The writer's rotation, stopped before its seal.
				wfs.arm(wal.SegmentPath(dir, 1))
				moved := make(chan error, 1)
				go func() {
					_, err := w.Rotate()
					if err == nil {
						r := put(next, string(rune('a'+next-1)), "v")
						_, err = w.Append(record.Append(nil, &r))
					}
					if err == nil {
						err = w.Sync()
					}
					if err == nil {
						err = w.Mark()
					}
					moved <- err
				}()
				<-wfs.paused

				// The reader lists both segments, reads the first, and
				// the writer goes on before its first open of the next.
				rfs := &hookFS{FS: mem, file: wal.SegmentPath(dir, c.seg), at: c.at, hook: func() {
					close(wfs.resume)
					if err := <-moved; err != nil {
						t.Errorf("writer: %v", err)
					}
				}}
				readBeside(t, reader, rfs, dir, c.keys, "a rotation")
				if rfs.hook != nil {
					// Check reads each segment once: the writer goes on
					// after it.
					close(wfs.resume)
					<-moved
				}
			})
		}
	}
}

// movingFS is a reader's file system beside a writer that rotates and
// commits a record before each of the reader's opens of the segment it
// appends to: no two of its reads see the same directory.
type movingFS struct {
	vfs.FS
	dir  string
	mu   sync.Mutex
	w    *wal.Writer
	rev  record.Revision
	fail error
}

func (m *movingFS) Open(name string) (vfs.File, error) {
	m.mu.Lock()
	if name != wal.SegmentPath(m.dir, m.w.Segment()) {
		m.mu.Unlock()
	} else {
		m.rev++
		r := put(m.rev, "k", "v")
		_, err := m.w.Rotate()
		if err == nil {
			_, err = m.w.Append(record.Append(nil, &r))
		}
		if err == nil {
			err = m.w.Sync()
		}
		if err != nil && m.fail == nil {
			m.fail = err
		}
		m.mu.Unlock()
	}
	return m.FS.Open(name)
}

// TestReadOnlyBusy: a reader beside a writer that moves under every one
// of its attempts gives up after its bound with an error matching
// ErrBusy, and never with one that IsCorrupt reports: it saw a moving
// directory, not a damaged one.
func TestReadOnlyBusy(t *testing.T) {
	for _, reader := range []string{"Recover", "Check"} {
		t.Run(reader, func(t *testing.T) {
			mem, dir := newDir(t)
			res, err := recovery.Recover(mem, dir, recovery.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Writer.Abandon()
			res.Map.Close()
			rfs := &movingFS{FS: mem, dir: dir, w: res.Writer}
			switch reader {
			case "Recover":
				_, err = recovery.Recover(rfs, dir, recovery.Options{ReadOnly: true})
			case "Check":
				_, err = recovery.Check(rfs, dir)
			}
			if rfs.fail != nil {
				t.Fatalf("writer: %v", rfs.fail)
			}
			if !errors.Is(err, recovery.ErrBusy) || recovery.IsCorrupt(err) {
				t.Fatalf("%s beside a writer that never stops: %v (ErrBusy %v, IsCorrupt %v), want ErrBusy and not corrupt",
					reader, err, errors.Is(err, recovery.ErrBusy), recovery.IsCorrupt(err))
			}
			if !strings.Contains(err.Error(), "is changing faster than a reader can read it") {
				t.Errorf("busy error %q does not say what happened", err)
			}
		})
	}
}

// staleFS is a reader's file system beside a writer that appended to
// file after the reader's first read of it: that read (the reader's
// first window of the segment) returns stale, the bytes before the
// append, and every later read the file as it is.
type staleFS struct {
	vfs.FS
	mu    sync.Mutex
	file  string
	stale []byte
}

func (s *staleFS) Open(name string) (vfs.File, error) {
	f, err := s.FS.Open(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || name != s.file || s.stale == nil {
		return f, err
	}
	stale := s.stale
	s.stale = nil
	return &staleFile{File: f, stale: stale}, nil
}

type staleFile struct {
	vfs.File
	stale []byte
}

func (f *staleFile) ReadAt(p []byte, off int64) (int, error) {
	if f.stale == nil {
		return f.File.ReadAt(p, off)
	}
	n, err := f.File.ReadAt(p, off)
	// The bytes the writer had written then, and zeros after them.
	clear(p[:n])
	if off < int64(len(f.stale)) {
		copy(p[:n], f.stale[off:])
	}
	f.stale = nil
	return n, err
}

// TestReadOnlyBesideAppend (item 6 of issue 39): a reader reads the first
// window of the newest segment while its writer is about to append, and
// the rest after the append: it finds zeros where a record starts, then
// records after them, a shape no crash leaves (FORMAT.md rule 3), in a
// segment no single moment held. Neither Recover nor Check may call it
// damage: the next attempt reads the segment whole.
func TestReadOnlyBesideAppend(t *testing.T) {
	for _, reader := range []string{"Recover", "Check"} {
		t.Run(reader, func(t *testing.T) {
			mem, dir := newDir(t)
			res, err := recovery.Recover(mem, dir, recovery.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := res.Writer
			defer w.Abandon()
			res.Map.Close()
			appendRec(t, w, 1)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := w.Mark(); err != nil {
				t.Fatal(err)
			}
			seg := wal.SegmentPath(dir, w.Segment())
			stale, err := vfs.ReadFile(mem, seg)
			if err != nil {
				t.Fatal(err)
			}
			stale = stale[:w.Offset()]
			// Records that reach past the reader's first window.
			for rev := record.Revision(2); rev <= 4; rev++ {
				r := put(rev, string(rune('a'+rev-1)), strings.Repeat("x", 1500))
				if _, err := w.Append(record.Append(nil, &r)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := w.Mark(); err != nil {
				t.Fatal(err)
			}
			rfs := &staleFS{FS: mem, file: seg, stale: stale}
			readBeside(t, reader, rfs, dir, 4, "an append")
			if rfs.stale != nil {
				t.Fatal("the reader never read the newest segment")
			}
		})
	}
}

// readBeside reads dir through fsys as reader ("Recover", read-only, or
// "Check") beside a writer's move (what it names), and requires the
// directory's keys, or no problem.
func readBeside(t *testing.T, reader string, fsys vfs.FS, dir string, keys int, what string) {
	t.Helper()
	switch reader {
	case "Recover":
		ro, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only Recover beside %s: %v", what, err)
		}
		defer ro.Map.Close()
		if diff := cmp.Diff(keys, ro.Map.Len()); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
	case "Check":
		rep, err := recovery.Check(fsys, dir)
		if err != nil {
			t.Fatalf("Check beside %s: %v", what, err)
		}
		if diff := cmp.Diff([]recovery.Problem(nil), rep.Problems); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	}
}
