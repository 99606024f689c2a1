package vfs

import (
	"fmt"
	"os"
	"path"
	"slices"
	"sync"
	"time"
)

// EventKind classifies a recorded event as the crash models see it.
type EventKind uint8

// Event kinds.
const (
	EvData     EventKind = iota + 1 // a write of file data
	EvSync                          // fdatasync of a file: its data durable
	EvDirSync                       // fsync of a directory: its entries durable
	EvMeta                          // create, rename, unlink, truncate, preallocate, mkdir
	EvIssue                         // the program starts operation N
	EvAck                           // the program promises operation N is durable (committed at Rev, if set)
	EvSyncFail                      // a sync that failed: its unsynced writes are lost
	EvRefused                       // operation N completed without committing anything
	EvRead                          // the program read state up to revision Rev: it promises Rev durable
)

var evNames = [...]string{"", "data", "sync", "dirsync", "meta", "issue", "ack", "syncfail", "refused", "read"}

// String names the kind as the simulator's reports do.
func (k EventKind) String() string {
	if int(k) < len(evNames) {
		return evNames[k]
	}
	return "event?"
}

// Event is one recorded call.
type Event struct {
	Kind  EventKind
	Op    string // write, fdatasync, fsync, create, rename, unlink, truncate, preallocate, mkdir, issue, ack
	Path  string // the file (the old name for a rename)
	To    string // the new name of a rename
	Inode int    // the file's identity: a create makes a new one
	Off   int64  // write offset, preallocate offset
	Data  []byte // written bytes
	Size  int64  // truncate size, preallocate length
	N     int    // operation number of issue, ack and refused
	Rev   uint64 // the revision of an ack (0 when not known) or a read
	Note  string // why an operation was refused
}

// String describes the event in one line, such as "rename snapshot.tmp ->
// snapshot".
func (e Event) String() string {
	b := func(p string) string { return path.Base(p) }
	switch e.Op {
	case "write":
		return fmt.Sprintf("write %d bytes to %s at %d", len(e.Data), b(e.Path), e.Off)
	case "rename":
		return fmt.Sprintf("rename %s -> %s", b(e.Path), b(e.To))
	case "truncate":
		return fmt.Sprintf("truncate %s to %d", b(e.Path), e.Size)
	case "preallocate":
		return fmt.Sprintf("preallocate %s %d+%d", b(e.Path), e.Off, e.Size)
	case "issue", "ack", "refused":
		return fmt.Sprintf("%s %d", e.Op, e.N)
	case "read":
		return fmt.Sprintf("read at revision %d", e.Rev)
	case "fsync":
		return fmt.Sprintf("fsync %s/", b(e.Path))
	}
	return fmt.Sprintf("%s %s", e.Op, b(e.Path))
}

// Recorder wraps an FS and records, in order, every call that changes
// files or makes them durable, with the identity (inode) of the file each
// concerns, so that a simulator can rebuild every state a crash could
// leave. Each call is recorded while it runs under one lock, so the order
// of the events is the order of their effects. Reads are not recorded.
type Recorder struct {
	FS FS

	mu     sync.Mutex
	events []Event
	names  map[string]int // current path -> inode
	next   int
	// FailSync, if set, is asked before each file sync (counted from 1):
	// when it returns true the sync fails with EIO-like errFailedSync, the
	// event is recorded as EvSyncFail, and the FS is not synced.
	FailSync func(n int) bool
	syncs    int
	// SyncDelay makes every file sync take at least this long, outside the
	// lock, so that the program's other goroutines run meanwhile as they
	// do while a real fdatasync waits for the disk.
	SyncDelay time.Duration
	salts     uint64 // salts handed out (NewSalt)
}

// NewRecorder records calls to fsys. The files that exist beforehand are
// named in initial; they get inodes 1, 2, ... in the order given.
func NewRecorder(fsys FS, initial []string) *Recorder {
	r := &Recorder{FS: fsys, names: map[string]int{}}
	for _, n := range initial {
		r.next++
		r.names[path.Clean(n)] = r.next
	}
	return r
}

// NewRecorderInodes records calls to fsys, whose files beforehand have
// the inodes given (path to inode), as a simulator that already tracks
// them numbers them; new files get numbers above every one given and
// above reserved.
func NewRecorderInodes(fsys FS, inodes map[string]int, reserved int) *Recorder {
	r := &Recorder{FS: fsys, names: map[string]int{}, next: reserved}
	for n, id := range inodes {
		r.names[path.Clean(n)] = id
		r.next = max(r.next, id)
	}
	return r
}

// NewSalt returns the salt of the next log segment created through the
// recorder (see wal.Salter): a fixed sequence, so that a simulation that
// creates segments in the same order builds the same bytes every run.
func (r *Recorder) NewSalt() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.salts++
	z := r.salts * 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31) | 1
}

// Events returns a copy of the events so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Issue records that the program starts operation n.
func (r *Recorder) Issue(n int) { r.add(Event{Kind: EvIssue, Op: "issue", N: n}) }

// Ack records that the program promises operation n is durable.
func (r *Recorder) Ack(n int) { r.add(Event{Kind: EvAck, Op: "ack", N: n}) }

// AckRev records that operation n committed at revision rev and is
// durable.
func (r *Recorder) AckRev(n int, rev uint64) { r.add(Event{Kind: EvAck, Op: "ack", N: n, Rev: rev}) }

// Refused records that operation n completed without committing anything
// (a fenced write, a failed add), and why.
func (r *Recorder) Refused(n int, why string) {
	r.add(Event{Kind: EvRefused, Op: "refused", N: n, Note: why})
}

// Read records that the program read the store's state up to revision
// rev (a value whose mod revision is rev, say): reads show only durable
// state, so it promises rev durable.
func (r *Recorder) Read(rev uint64) { r.add(Event{Kind: EvRead, Op: "read", Rev: rev}) }

func (r *Recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *Recorder) inode(name string) int {
	name = path.Clean(name)
	if id, ok := r.names[name]; ok {
		return id
	}
	r.next++
	r.names[name] = r.next
	return r.next
}

// ErrInjectedSync is the error of a sync that FailSync chose to fail.
var ErrInjectedSync = fmt.Errorf("vfs: injected fsync failure (EIO)")

// Create implements FS.
func (r *Recorder) Create(name string) (File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := r.FS.Create(name)
	if err != nil {
		return nil, err
	}
	r.next++
	id := r.next
	r.names[path.Clean(name)] = id
	r.events = append(r.events, Event{Kind: EvMeta, Op: "create", Path: name, Inode: id})
	return &recFile{File: f, r: r, name: name, id: id}, nil
}

func (r *Recorder) open(name string, f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	id := r.inode(name)
	r.mu.Unlock()
	return &recFile{File: f, r: r, name: name, id: id}, nil
}

// Open implements FS.
func (r *Recorder) Open(name string) (File, error) {
	f, err := r.FS.Open(name)
	return r.open(name, f, err)
}

// OpenReadWrite implements FS.
func (r *Recorder) OpenReadWrite(name string) (File, error) {
	f, err := r.FS.OpenReadWrite(name)
	return r.open(name, f, err)
}

// OpenDir implements FS.
func (r *Recorder) OpenDir(name string) (File, error) {
	f, err := r.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &recFile{File: f, r: r, name: name, dir: true}, nil
}

// Rename implements FS.
func (r *Recorder) Rename(oldname, newname string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.FS.Rename(oldname, newname); err != nil {
		return err
	}
	id := r.inode(oldname)
	delete(r.names, path.Clean(oldname))
	r.names[path.Clean(newname)] = id
	r.events = append(r.events, Event{Kind: EvMeta, Op: "rename", Path: oldname, To: newname, Inode: id})
	return nil
}

// Remove implements FS.
func (r *Recorder) Remove(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.FS.Remove(name); err != nil {
		return err
	}
	id := r.inode(name)
	delete(r.names, path.Clean(name))
	r.events = append(r.events, Event{Kind: EvMeta, Op: "unlink", Path: name, Inode: id})
	return nil
}

// List implements FS.
func (r *Recorder) List(dir string) ([]string, error) { return r.FS.List(dir) }

// Stat implements FS.
func (r *Recorder) Stat(name string) (os.FileInfo, error) { return r.FS.Stat(name) }

// MkdirAll implements FS.
func (r *Recorder) MkdirAll(dir string, perm os.FileMode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.FS.MkdirAll(dir, perm); err != nil {
		return err
	}
	r.events = append(r.events, Event{Kind: EvMeta, Op: "mkdir", Path: dir})
	return nil
}

// Lock implements FS. The lock file is not recorded: no state depends on
// it.
func (r *Recorder) Lock(name string, exclusive bool) (File, error) {
	return r.FS.Lock(name, exclusive)
}

type recFile struct {
	File
	r    *Recorder
	name string
	id   int
	dir  bool
}

func (f *recFile) WriteAt(p []byte, off int64) (int, error) {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	n, err := f.File.WriteAt(p, off)
	if n > 0 {
		f.r.events = append(f.r.events, Event{Kind: EvData, Op: "write", Path: f.name, Inode: f.id, Off: off, Data: slices.Clone(p[:n])})
	}
	return n, err
}

func (f *recFile) Sync() error {
	if d := f.r.SyncDelay; d > 0 && !f.dir {
		time.Sleep(d)
	}
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if f.dir {
		if err := f.File.Sync(); err != nil {
			return err
		}
		f.r.events = append(f.r.events, Event{Kind: EvDirSync, Op: "fsync", Path: f.name})
		return nil
	}
	f.r.syncs++
	if f.r.FailSync != nil && f.r.FailSync(f.r.syncs) {
		f.r.events = append(f.r.events, Event{Kind: EvSyncFail, Op: "fdatasync-failed", Path: f.name, Inode: f.id})
		return &os.PathError{Op: "fdatasync", Path: f.name, Err: ErrInjectedSync}
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.r.events = append(f.r.events, Event{Kind: EvSync, Op: "fdatasync", Path: f.name, Inode: f.id})
	return nil
}

func (f *recFile) Truncate(size int64) error {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.r.events = append(f.r.events, Event{Kind: EvMeta, Op: "truncate", Path: f.name, Inode: f.id, Size: size})
	return nil
}

func (f *recFile) Preallocate(off, n int64) error {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if err := f.File.Preallocate(off, n); err != nil {
		return err
	}
	if n > 0 {
		f.r.events = append(f.r.events, Event{Kind: EvMeta, Op: "preallocate", Path: f.name, Inode: f.id, Off: off, Size: n})
	}
	return nil
}

// ReadDurableAt passes a durable read on to the file system below
// (DurableReader); it is a read, and records nothing.
func (r *Recorder) ReadDurableAt(name string, p []byte, off int64) (int, error) {
	return ReadDurableAt(r.FS, name, p, off)
}
