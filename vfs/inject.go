package vfs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// OpKind is the kind of a file system operation, as an injecting or
// recording wrapper sees it.
type OpKind uint8

// Operation kinds.
const (
	OpCreate OpKind = iota + 1
	OpOpen
	OpWrite
	OpRead
	OpSync    // fdatasync of a file
	OpDirSync // fsync of a directory
	OpTruncate
	OpPreallocate
	OpRename
	OpRemove
	OpList
	OpStat
	OpMkdir
	OpLock
	OpClose
	OpStatfs // FreeSpace
)

var opNames = [...]string{"", "create", "open", "write", "read", "sync", "dirsync", "truncate",
	"preallocate", "rename", "remove", "list", "stat", "mkdir", "lock", "close", "statfs"}

// String names the kind.
func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "op?"
}

// Mutates reports whether an operation of this kind changes files.
func (k OpKind) Mutates() bool {
	switch k {
	case OpCreate, OpWrite, OpSync, OpDirSync, OpTruncate, OpPreallocate, OpRename, OpRemove, OpMkdir:
		return true
	}
	return false
}

// Op describes one operation for an Inject rule.
type Op struct {
	Kind OpKind
	Path string // the file, or the old name of a rename
	Seq  int    // 1 for the first operation the wrapper saw, and so on
	// Off and Len are the byte range of a write or a preallocation, so
	// that a rule can fill the disk at a given size.
	Off, Len int64
}

// Inject wraps an FS and asks Rule before every operation: a non-nil error
// fails the operation with that error, wrapped in an *os.PathError naming
// the operation and the file, and the operation does not reach the wrapped
// FS. A nil Rule lets everything through.
//
// Return a syscall.Errno (syscall.EIO, syscall.ENOSPC) to fail as the
// kernel does: errors.Is(err, syscall.ENOSPC) then holds for the caller,
// as it does for the OS file system's errors. Return a *ShortWrite for a
// write to write part of the buffer and then fail.
type Inject struct {
	FS   FS
	Rule func(Op) error

	mu  sync.Mutex
	seq int
}

// ShortWrite is a Rule error that makes a write write the first N bytes of
// its buffer to the wrapped file (all of them when N is not less than the
// length) and then fail with Err, or syscall.EIO when Err is nil: the shape
// of a write that runs out of space or meets a bad block part way. With
// Align > 0 the bytes written stop short of N at the last multiple of
// Align in the file, as the kernel's do: it fills the page cache a page at
// a time, so a write that runs out of space ends at a page boundary. Any
// other operation fails with Err as if the rule had returned it.
type ShortWrite struct {
	N     int
	Align int64
	Err   error
}

// keep returns how many bytes of a write of n bytes at off reach the file.
func (e *ShortWrite) keep(off int64, n int) int {
	k := max(0, min(e.N, n))
	if e.Align > 0 {
		k = int(max(0, (off+int64(k))/e.Align*e.Align-off))
	}
	return k
}

// Error implements error.
func (e *ShortWrite) Error() string {
	return fmt.Sprintf("short write of %d bytes: %v", e.N, e.cause())
}

// Unwrap returns the cause, so that errors.Is sees the errno.
func (e *ShortWrite) Unwrap() error { return e.cause() }

func (e *ShortWrite) cause() error {
	if e.Err == nil {
		return syscall.EIO
	}
	return e.Err
}

// ask numbers the operation and returns the rule's verdict on it.
func (in *Inject) ask(k OpKind, path string) error { return in.askRange(k, path, 0, 0) }

func (in *Inject) askRange(k OpKind, path string, off, n int64) error {
	in.mu.Lock()
	in.seq++
	op := Op{Kind: k, Path: path, Seq: in.seq, Off: off, Len: n}
	in.mu.Unlock()
	if in.Rule == nil {
		return nil
	}
	return in.Rule(op)
}

// failure wraps a rule's error as the OS file system wraps an errno.
func failure(k OpKind, path string, err error) error {
	var sw *ShortWrite
	if errors.As(err, &sw) {
		err = sw.cause()
	}
	return &os.PathError{Op: k.String(), Path: path, Err: err}
}

func (in *Inject) check(k OpKind, path string) error {
	if err := in.ask(k, path); err != nil {
		return failure(k, path, err)
	}
	return nil
}

func (in *Inject) wrap(name string, f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &injectFile{File: f, in: in, name: name}, nil
}

// Create implements FS.
func (in *Inject) Create(name string) (File, error) {
	if err := in.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := in.FS.Create(name)
	return in.wrap(name, f, err)
}

// Open implements FS.
func (in *Inject) Open(name string) (File, error) {
	if err := in.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := in.FS.Open(name)
	return in.wrap(name, f, err)
}

// OpenReadWrite implements FS.
func (in *Inject) OpenReadWrite(name string) (File, error) {
	if err := in.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := in.FS.OpenReadWrite(name)
	return in.wrap(name, f, err)
}

// OpenDir implements FS. Syncing the result is an OpDirSync.
func (in *Inject) OpenDir(name string) (File, error) {
	if err := in.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := in.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &injectFile{File: f, in: in, name: name, dir: true}, nil
}

// Rename implements FS.
func (in *Inject) Rename(oldname, newname string) error {
	if err := in.check(OpRename, oldname); err != nil {
		return err
	}
	return in.FS.Rename(oldname, newname)
}

// Remove implements FS.
func (in *Inject) Remove(name string) error {
	if err := in.check(OpRemove, name); err != nil {
		return err
	}
	return in.FS.Remove(name)
}

// List implements FS.
func (in *Inject) List(dir string) ([]string, error) {
	if err := in.check(OpList, dir); err != nil {
		return nil, err
	}
	return in.FS.List(dir)
}

// Stat implements FS.
func (in *Inject) Stat(name string) (os.FileInfo, error) {
	if err := in.check(OpStat, name); err != nil {
		return nil, err
	}
	return in.FS.Stat(name)
}

// MkdirAll implements FS.
func (in *Inject) MkdirAll(dir string, perm os.FileMode) error {
	if err := in.check(OpMkdir, dir); err != nil {
		return err
	}
	return in.FS.MkdirAll(dir, perm)
}

// Lock implements FS.
func (in *Inject) Lock(name string, exclusive bool) (File, error) {
	if err := in.check(OpLock, name); err != nil {
		return nil, err
	}
	f, err := in.FS.Lock(name, exclusive)
	return in.wrap(name, f, err)
}

type injectFile struct {
	File
	in   *Inject
	name string
	dir  bool
}

func (f *injectFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.in.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *injectFile) WriteAt(p []byte, off int64) (int, error) {
	err := f.in.askRange(OpWrite, f.name, off, int64(len(p)))
	if err == nil {
		return f.File.WriteAt(p, off)
	}
	var sw *ShortWrite
	if !errors.As(err, &sw) || sw.keep(off, len(p)) == 0 {
		return 0, failure(OpWrite, f.name, err)
	}
	n, werr := f.File.WriteAt(p[:sw.keep(off, len(p))], off)
	if werr != nil {
		return n, werr
	}
	return n, failure(OpWrite, f.name, err)
}

func (f *injectFile) Sync() error {
	k := OpSync
	if f.dir {
		k = OpDirSync
	}
	if err := f.in.check(k, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *injectFile) Truncate(size int64) error {
	if err := f.in.check(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *injectFile) Preallocate(off, n int64) error {
	if err := f.in.askRange(OpPreallocate, f.name, off, n); err != nil {
		return failure(OpPreallocate, f.name, err)
	}
	return f.File.Preallocate(off, n)
}

func (f *injectFile) Close() error {
	if err := f.in.check(OpClose, f.name); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

// CrashAfter returns a Rule that lets the first n operations that change
// files through and fails every operation after them with err, as if the
// process had died: the wrapped FS then holds the state a process crash
// after those n operations leaves. It reports through crashed whether the
// crash point was reached.
func CrashAfter(n int, err error) (rule func(Op) error, crashed func() bool) {
	var mu sync.Mutex
	done, dead := 0, false
	rule = func(op Op) error {
		mu.Lock()
		defer mu.Unlock()
		if dead {
			return err
		}
		if op.Kind.Mutates() {
			if done == n {
				dead = true
				return err
			}
			done++
		}
		return nil
	}
	crashed = func() bool {
		mu.Lock()
		defer mu.Unlock()
		return dead
	}
	return rule, crashed
}

// ReadDurableAt passes a durable read on to the file system below
// (DurableReader); no rule is asked.
func (i *Inject) ReadDurableAt(name string, p []byte, off int64) (int, error) {
	return ReadDurableAt(i.FS, name, p, off)
}
