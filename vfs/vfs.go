package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// FS is the only way the store touches files. Every method names the
// durability it gives; nothing is durable unless a method says so.
//
// Names are slash-separated paths as accepted by the host file system; the
// store always passes a directory joined with a base name.
type FS interface {
	// Create creates a new, empty file opened for reading and writing. The
	// file must not exist: Create always makes a new inode and fails with an
	// error matching os.ErrExist otherwise. Neither the file's name nor its
	// data is durable until the file is synced (data) and its directory is
	// synced (name).
	Create(name string) (File, error)

	// Open opens an existing regular file for reading. It never follows
	// a symbolic link and never waits on a FIFO: a name that is not a
	// regular file (a symbolic link, directory, FIFO, socket or device)
	// fails with an *os.PathError naming it, saying what it is, and
	// matching ErrNotRegular.
	Open(name string) (File, error)

	// OpenReadWrite opens an existing regular file for reading and
	// writing at explicit offsets, and refuses anything else as Open
	// does. It makes nothing durable.
	OpenReadWrite(name string) (File, error)

	// OpenDir opens a directory so that Sync on the result makes its
	// entries (creates, renames and removes inside it) durable.
	OpenDir(name string) (File, error)

	// Rename atomically replaces newname with oldname. The change is durable
	// only after the directory holding both is synced.
	Rename(oldname, newname string) error

	// Remove unlinks a file or an empty directory. The change is durable
	// only after the parent directory is synced.
	Remove(name string) error

	// List returns the base names in directory dir, sorted.
	List(dir string) ([]string, error)

	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)

	// MkdirAll creates a directory and any missing parents. The new entries
	// are durable only after their parents are synced.
	MkdirAll(dir string, perm os.FileMode) error

	// Lock takes an advisory lock (flock) on name, creating the file if it
	// does not exist, and returns the file opened for reading and writing.
	// With exclusive false the lock is shared. Lock does not wait: when
	// another holder conflicts it fails with an error matching ErrLocked.
	// Closing the file releases the lock; so does the process's death.
	Lock(name string, exclusive bool) (File, error)
}

// LockWait is fsys.Lock that waits, until ctx ends, while another holder
// conflicts; when ctx ends first, its error matches both ErrLocked and
// ctx's error. On the OS it waits in flock(2), so the lock passes to a
// waiter as soon as it is let go; on other file systems it tries again
// every millisecond or few.
func LockWait(ctx context.Context, fsys FS, name string, exclusive bool) (File, error) {
	f, err := fsys.Lock(name, exclusive)
	if err == nil || !errors.Is(err, ErrLocked) || ctx.Err() != nil {
		return f, err
	}
	if w, ok := fsys.(interface {
		lockWait(context.Context, string, bool) (File, error)
	}); ok {
		return w.lockWait(ctx, name, exclusive)
	}
	pause := time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil, &os.PathError{Op: "flock", Path: name, Err: fmt.Errorf("%w (%w)", ErrLocked, ctx.Err())}
		case <-time.After(pause):
		}
		f, err = fsys.Lock(name, exclusive)
		if err == nil || !errors.Is(err, ErrLocked) {
			return f, err
		}
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// WillNeed tells the file system that f is about to be read whole, from
// the start, so that the reading can run ahead of the reader (on the OS,
// posix_fadvise WILLNEED, which starts the first few MiB). It is a hint:
// where a File cannot take it, as in memory or through the fault
// injector, it does nothing.
func WillNeed(f File) {
	if w, ok := f.(interface{ WillNeed() }); ok {
		w.WillNeed()
	}
}

// Size returns the size of the open file f: Stat's, which on the OS it
// takes from fstat with no FileInfo built (code a new process's open
// need not run).
func Size(f File) (int64, error) {
	// The OS's fast paths are found by concrete type, not by asserting an
	// interface: the first assertion of each pair of types in a process
	// builds its itab from the types' method tables, and those of an open
	// (here, in ReadPrefix and MapFile, and variant.Of's) were 6% of a new
	// process's reopen of 1M keys (bench/RESULTS.md).
	if o, ok := f.(*osFile); ok {
		return o.size()
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// ReadPrefix returns the first n bytes of the regular file name, fewer
// when the file is shorter: what Open then ReadAt return, with Open's
// errors. On the OS it takes five system calls, with no File made.
func ReadPrefix(fsys FS, name string, n int) ([]byte, error) {
	if o, ok := fsys.(osFS); ok { // by concrete type: see Size
		return o.readPrefix(name, n)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:k], nil
}

// File is an open file or directory.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer

	// Sync makes the file's data durable (fdatasync), including the size
	// when it changed. It never makes the file's name durable: sync the
	// directory for that. On a directory, Sync makes its entries durable
	// (fsync).
	Sync() error

	// Truncate changes the size of the file. The new size is durable after
	// Sync.
	Truncate(size int64) error

	// Preallocate reserves disk blocks for [off, off+n), extending the size
	// of the file with zeros when off+n is past its end, so that later
	// writes inside the range need not change the size. It is durable after
	// Sync. A file system without support returns nil and does nothing.
	Preallocate(off, n int64) error

	// Stat describes the open file.
	Stat() (os.FileInfo, error)

	// Name returns the name the file was opened with.
	Name() string
}

// fileInfo is a minimal os.FileInfo for the in-memory file system.
type fileInfo struct {
	name  string
	size  int64
	isDir bool
}

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64  { return fi.size }
func (fi fileInfo) Mode() os.FileMode {
	if fi.isDir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.isDir }
func (fi fileInfo) Sys() any           { return nil }
