package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// MemFS is an in-memory FS for tests. It keeps, for every file, its current
// contents and its durable contents (what a sync made durable), and for
// every directory its current and durable entries, so that CrashClone can
// build the state a power loss would leave under the strictest model:
// nothing that was not synced survives.
//
// Directories created by MkdirAll are durable at once. Locks are per MemFS
// and are released when the file returned by Lock is closed.
type MemFS struct {
	mu   sync.Mutex
	root *inode
	// changed is closed at the next change of any file or directory
	// (see WatchDir); nil until a watch asks for it.
	changed chan struct{}
	// capacity bounds the bytes the files hold (SetCapacity); 0: none.
	capacity int64
}

type inode struct {
	isDir bool
	// Files.
	data    []byte
	durable []byte
	// pending lists the changes to data since the last sync, in order,
	// which the next Sync applies to durable: the kernel's dirty pages.
	pending []memOp
	// Directories.
	entries        map[string]*inode
	durableEntries map[string]*inode
	// Locks.
	shared    int
	exclusive bool
}

// memOp is a change to a file's data not yet synced: a write of the bytes
// [off, off+n), or a size change to n (truncate, preallocate).
type memOp struct {
	size   bool
	off, n int64
}

// syncData makes the pending changes of n durable, with the contents
// the file holds now.
func (n *inode) syncData() {
	d := n.durable
	for _, op := range n.pending {
		switch {
		case op.size && op.n <= int64(len(d)):
			d = d[:op.n:op.n]
		case op.size:
			d = append(d, make([]byte, op.n-int64(len(d)))...)
		default:
			end := op.off + op.n
			if end > int64(len(d)) {
				d = append(d, make([]byte, end-int64(len(d)))...)
			}
			// The page cache holds the latest bytes; a part of the range
			// truncated away since writes nothing.
			if op.off < int64(len(n.data)) {
				copy(d[op.off:end], n.data[op.off:min(end, int64(len(n.data)))])
			}
		}
	}
	n.durable = slices.Clone(d)
	n.pending = nil
}

func newDir() *inode {
	return &inode{isDir: true, entries: map[string]*inode{}, durableEntries: map[string]*inode{}}
}

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS { return &MemFS{root: newDir()} }

func split(name string) []string {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// lookup returns the directory holding name and the base name.
func (m *MemFS) parent(op, name string) (*inode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &os.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	dir := m.root
	for _, p := range parts[:len(parts)-1] {
		next, ok := dir.entries[p]
		if !ok || !next.isDir {
			return nil, "", &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		dir = next
	}
	return dir, parts[len(parts)-1], nil
}

func (m *MemFS) lookup(op, name string) (*inode, error) {
	if len(split(name)) == 0 {
		return m.root, nil
	}
	dir, base, err := m.parent(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.entries[base]
	if !ok {
		return nil, &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.touch()
	dir, base, err := m.parent("create", name)
	if err != nil {
		return nil, err
	}
	if _, ok := dir.entries[base]; ok {
		return nil, &os.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	n := &inode{}
	dir.entries[base] = n
	return &memFile{fs: m, n: n, name: name, writable: true}, nil
}

func (m *MemFS) open(op, name string, writable, wantDir bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(op, name)
	if err != nil {
		return nil, err
	}
	if n.isDir && !wantDir {
		// As on the OS: Open and OpenReadWrite open regular files only.
		return nil, notRegular(name, "directory")
	}
	if !n.isDir && wantDir {
		return nil, &os.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return &memFile{fs: m, n: n, name: name, writable: writable}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false, false) }

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open("open", name, true, false) }

// OpenDir implements FS.
func (m *MemFS) OpenDir(name string) (File, error) { return m.open("open", name, false, true) }

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.touch()
	od, ob, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	nd, nb, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	n, ok := od.entries[ob]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(od.entries, ob)
	nd.entries[nb] = n
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.touch()
	dir, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.entries[base]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.isDir && len(n.entries) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(dir.entries, base)
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: errors.New("not a directory")}
	}
	names := make([]string, 0, len(n.entries))
	for k := range n.entries {
		names = append(names, k)
	}
	slices.Sort(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), size: int64(len(n.data)), isDir: n.isDir}, nil
}

// MkdirAll implements FS. The directories it creates are durable at once.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.touch()
	cur := m.root
	for _, p := range split(dir) {
		next, ok := cur.entries[p]
		if !ok {
			next = newDir()
			cur.entries[p] = next
			cur.durableEntries[p] = next
		} else if !next.isDir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
		}
		cur = next
	}
	return nil
}

// Lock implements FS.
func (m *MemFS) Lock(name string, exclusive bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("flock", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.entries[base]
	if !ok {
		n = &inode{}
		dir.entries[base] = n
	}
	if n.exclusive || (exclusive && n.shared > 0) {
		return nil, &os.PathError{Op: "flock", Path: name, Err: ErrLocked}
	}
	if exclusive {
		n.exclusive = true
	} else {
		n.shared++
	}
	return &memFile{fs: m, n: n, name: name, writable: true, lock: true, exclusive: exclusive}, nil
}

// DropDirty models a failed fdatasync of the file name as ext4 and XFS
// handle one: the file's unsynced writes stay in the page cache, so that
// every read in this boot returns them, but they are marked clean: no
// later Sync writes them (unless they are written again), and CrashClone
// does not have them. Size changes (Truncate, Preallocate) are metadata,
// which the file system's journal commits later: they stay pending.
func (m *MemFS) DropDirty(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("fdatasync", name)
	if err != nil {
		return err
	}
	keep := n.pending[:0]
	for _, op := range n.pending {
		if op.size {
			keep = append(keep, op)
		}
	}
	n.pending = keep
	return nil
}

// CrashClone returns a new MemFS holding only what is durable in m: the
// durable entries of every directory and the durable contents of every
// file. Locks are not carried over, as after a reboot.
func (m *MemFS) CrashClone() *MemFS { return m.clone(true) }

// Clone returns a deep copy of m's current state, as a process crash
// leaves it (the page cache survives): every current entry and every
// file's current contents. Durable state is copied too.
func (m *MemFS) Clone() *MemFS { return m.clone(false) }

// clone copies the tree, keeping files shared by several names shared.
// With durableOnly, what is not durable is left out and the copy's
// current state is the durable one.
func (m *MemFS) clone(durableOnly bool) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*inode]*inode{}
	var clone func(n *inode) *inode
	clone = func(n *inode) *inode {
		if c, ok := seen[n]; ok {
			return c
		}
		c := &inode{isDir: n.isDir, data: slices.Clone(n.data), durable: slices.Clone(n.durable), pending: slices.Clone(n.pending)}
		if durableOnly {
			c.data, c.pending = slices.Clone(n.durable), nil
		}
		seen[n] = c
		if n.isDir {
			c.entries, c.durableEntries = map[string]*inode{}, map[string]*inode{}
			for k, v := range n.durableEntries {
				c.durableEntries[k] = clone(v)
			}
			if durableOnly {
				c.entries = maps.Clone(c.durableEntries)
			} else {
				for k, v := range n.entries {
					c.entries[k] = clone(v)
				}
			}
		}
		return c
	}
	return &MemFS{root: clone(m.root), capacity: m.capacity}
}

type memFile struct {
	fs        *MemFS
	n         *inode
	name      string
	writable  bool
	lock      bool
	exclusive bool
	closed    bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	if write && (!f.writable || f.n.isDir) {
		return &os.PathError{Op: op, Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	defer f.fs.touch()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	end := off + int64(len(p))
	if err := f.fs.room("write", f.name, end-int64(len(f.n.data))); err != nil {
		return 0, err
	}
	if end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.pending = append(f.n.pending, memOp{off: off, n: int64(len(p))})
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if f.n.isDir {
		f.n.durableEntries = make(map[string]*inode, len(f.n.entries))
		for k, v := range f.n.entries {
			f.n.durableEntries[k] = v
		}
		return nil
	}
	f.n.syncData()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	defer f.fs.touch()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := f.fs.room("truncate", f.name, size-int64(len(f.n.data))); err != nil {
		return err
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	f.n.pending = append(f.n.pending, memOp{size: true, n: size})
	return nil
}

func (f *memFile) Preallocate(off, n int64) error {
	if n <= 0 {
		return nil // as osFile: an empty range is a no-op
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	defer f.fs.touch()
	if err := f.check("fallocate", true); err != nil {
		return err
	}
	if off < 0 {
		return &os.PathError{Op: "fallocate", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := f.fs.room("fallocate", f.name, off+n-int64(len(f.n.data))); err != nil {
		return err
	}
	if end := off + n; end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
		f.n.pending = append(f.n.pending, memOp{size: true, n: end})
	}
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(f.name), size: int64(len(f.n.data)), isDir: f.n.isDir}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	if f.lock {
		if f.exclusive {
			f.n.exclusive = false
		} else {
			f.n.shared--
		}
	}
	return nil
}

// String describes the file for debugging.
func (f *memFile) String() string { return fmt.Sprintf("memFile(%s)", f.name) }

// touch wakes the watches: something changed. m.mu is held.
func (m *MemFS) touch() {
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// changes returns the channel the next change closes.
func (m *MemFS) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

// WatchDir implements Notifier. It wakes at any change of the file
// system, not only in dir: a spurious wake is allowed.
func (m *MemFS) WatchDir(dir string) (DirWatch, error) {
	if _, err := m.Stat(dir); err != nil {
		return nil, err
	}
	return &memDirWatch{m: m, ch: m.changes()}, nil
}

type memDirWatch struct {
	m  *MemFS
	ch <-chan struct{}
}

func (w *memDirWatch) Wait(ctx context.Context) error {
	select {
	case <-w.ch:
		w.ch = w.m.changes()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *memDirWatch) Close() error { return nil }

// ReadDurableAt implements DurableReader: it reads the file's durable
// contents, what CrashClone would keep of it.
func (m *MemFS) ReadDurableAt(name string, p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("read", name)
	if err != nil {
		return 0, err
	}
	if n.isDir {
		return 0, &os.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	if off >= int64(len(n.durable)) {
		return 0, io.EOF
	}
	c := copy(p, n.durable[off:])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}
