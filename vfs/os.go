package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// OS is the FS of the host operating system. It is the only code in the
// module that makes file system calls for the store. It creates files with
// permission 0600 (before the umask): the store's data is its owner's.
var OS FS = osFS{}

// DefaultFileMode is the permission of the files OS creates.
const DefaultFileMode os.FileMode = 0o600

// NewOS returns the host file system creating files (Create, and Lock when
// the lock file is new) with permission perm before the umask; 0 means
// DefaultFileMode.
func NewOS(perm os.FileMode) FS { return osFS{perm: perm & os.ModePerm} }

type osFS struct {
	perm os.FileMode // 0 means DefaultFileMode
}

func (o osFS) mode() os.FileMode {
	if o.perm == 0 {
		return DefaultFileMode
	}
	return o.perm
}

func (o osFS) Create(name string) (File, error) {
	// O_EXCL: a create is always a new inode, never a reuse of an old one
	// whose stale bytes could be read back. It also never follows a
	// symbolic link planted under name: open(2) fails with EEXIST.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, o.mode())
	if err != nil {
		return nil, err // *os.PathError names the file
	}
	return &osFile{f: f}, nil
}

func (osFS) Open(name string) (File, error) { return openRegular(name, unix.O_RDONLY) }

func (osFS) OpenReadWrite(name string) (File, error) { return openRegular(name, unix.O_RDWR) }

// openRegular opens name, which must be a regular file, with flag
// (O_RDONLY or O_RDWR). The store reads and writes only regular files it
// created: anything else under one of their names was planted, and
// reading it as a segment (and cutting a "torn tail" off it) would write
// through a symbolic link to a file outside the directory.
//
// O_NOFOLLOW makes the open fail with ELOOP on a symbolic link rather
// than open its target; O_NONBLOCK makes it return at once on a FIFO,
// which would otherwise wait for a writer (on a regular file it has no
// effect, and it is cleared before the file is used). fstat on the
// descriptor then checks what was opened, with no window for the name to
// change in between.
func openRegular(name string, flag int) (File, error) {
	var st unix.Stat_t
	fd, err := openRegularFD(name, flag, &st)
	if err != nil {
		return nil, err
	}
	return &osFile{f: os.NewFile(uintptr(fd), name)}, nil
}

// openRegularFD is openRegular's descriptor, blocking; st receives the
// fstat that checked it.
func openRegularFD(name string, flag int, st *unix.Stat_t) (int, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		switch err {
		case unix.ELOOP:
			// O_NOFOLLOW met a symbolic link as the last component.
			return -1, notRegular(name, "symbolic link")
		case unix.EISDIR, unix.ENXIO:
			// A directory opened for writing, or a socket: say what the
			// name is, as fstat would have.
			var lst unix.Stat_t
			if unix.Lstat(name, &lst) == nil && lst.Mode&unix.S_IFMT != unix.S_IFREG {
				return -1, notRegular(name, fileKind(uint32(lst.Mode)))
			}
		}
		return -1, &os.PathError{Op: "open", Path: name, Err: err}
	}
	op := "fstat"
	for {
		err = unix.Fstat(fd, st)
		if err != unix.EINTR {
			break
		}
	}
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, notRegular(name, fileKind(uint32(st.Mode)))
	}
	if err == nil {
		// Every status flag the open set is O_NONBLOCK (O_NOFOLLOW and
		// O_CLOEXEC are not status flags): one F_SETFL of none clears
		// it, where unix.SetNonblock reads the flags first.
		op = "fcntl"
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0)
	}
	if err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: op, Path: name, Err: err}
	}
	return fd, nil
}

// readPrefix is ReadPrefix on the OS: open, fstat, fcntl, pread and
// close, where Open, ReadAt and Close took eight system calls (the os
// package's own checks of the descriptor, and a read past the end to
// find it). O_NONBLOCK is cleared as Open clears it: a regular file
// ignores it on most file systems, not necessarily on every FUSE one.
func (osFS) readPrefix(name string, n int) ([]byte, error) {
	var st unix.Stat_t
	fd, err := openRegularFD(name, unix.O_RDONLY, &st)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, n)
	got := 0
	for got < n {
		k, err := unix.Pread(fd, b[got:], int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
		}
		got += k
		// At the size fstat saw, the read that would return 0 is left
		// out: ReadAt's answer for a file that grows only after the
		// open's fstat.
		if k == 0 || int64(got) >= st.Size {
			break
		}
	}
	return b[:got], nil
}

// fileKind names the type of a file in the words of notRegular.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("file of type %#o", mode&unix.S_IFMT)
}

// notRegular is the error of an open of name, which is a kind (a
// directory, a FIFO, …) rather than a regular file: an *os.PathError
// naming the file, matching ErrNotRegular.
func notRegular(name, kind string) error {
	return &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind)}
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f, dir: true}, nil
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (o osFS) Lock(name string, exclusive bool) (File, error) {
	// A holder may unlink the lock file before it lets go of it (an open
	// that failed to create a store removes what it created): a lock
	// taken on the unlinked file is no lock, and is taken again on the
	// file the name now holds.
	for range 100 {
		f, err := o.lockOnce(name, exclusive, false)
		if err != errLockStale {
			return f, err
		}
	}
	return nil, &os.PathError{Op: "flock", Path: name, Err: errors.New("the lock file keeps being replaced")}
}

// errLockStale is lockOnce's: the file locked is no longer under name.
var errLockStale = errors.New("vfs: lock file replaced")

// lockWait is Lock that waits in flock(2) itself while another holder
// conflicts, so that the lock passes to a waiter the moment it is let go
// (a poll every few milliseconds leaves it idle between holders). The
// kernel cannot be told to stop waiting: when ctx ends first, LockWait
// returns and leaves a goroutine in flock, which lets the lock go the
// moment it gets it.
func (o osFS) lockWait(ctx context.Context, name string, exclusive bool) (File, error) {
	type result struct {
		f   File
		err error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		for range 100 {
			r.f, r.err = o.lockOnce(name, exclusive, true)
			if r.err != errLockStale {
				got <- r
				return
			}
		}
		got <- result{err: &os.PathError{Op: "flock", Path: name, Err: errors.New("the lock file keeps being replaced")}}
	}()
	select {
	case r := <-got:
		return r.f, r.err
	case <-ctx.Done():
		go func() {
			if r := <-got; r.f != nil {
				r.f.Close()
			}
		}()
		return nil, &os.PathError{Op: "flock", Path: name, Err: fmt.Errorf("%w (%w)", ErrLocked, ctx.Err())}
	}
}

func (o osFS) lockOnce(name string, exclusive, wait bool) (File, error) {
	// O_NOFOLLOW: the holder truncates and writes the lock file, which must
	// never reach a file outside the directory through a planted symlink.
	// unix.Open, not os.OpenFile, whose file it would try to add to the
	// runtime's poller (for a regular file, in vain): a short-lived
	// process's open paid for the poller's start and five more system
	// calls.
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(o.mode().Perm()))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &os.PathError{Op: "flock", Path: name, Err: ErrLocked}
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	var held, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(name, &named) != nil ||
		held.Ino != named.Ino || held.Dev != named.Dev {
		f.Close()
		return nil, errLockStale
	}
	return &osFile{f: f}, nil
}

type osFile struct {
	f   *os.File
	dir bool
}

func (f *osFile) Name() string { return f.f.Name() }

func (f *osFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f *osFile) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }

func (f *osFile) Close() error { return f.f.Close() }

// size is Size on the OS: fstat, with no FileInfo built.
func (f *osFile) size() (int64, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(int(f.f.Fd()), &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "fstat", Path: f.f.Name(), Err: err}
		}
		return st.Size, nil
	}
}

func (f *osFile) Stat() (os.FileInfo, error) { return f.f.Stat() }

func (f *osFile) Truncate(size int64) error { return f.f.Truncate(size) }

func (f *osFile) Sync() error {
	var err error
	op := dataSyncOp
	for {
		if f.dir {
			// A directory's entries are metadata: only fsync flushes them.
			op = "fsync"
			err = unix.Fsync(int(f.f.Fd()))
		} else {
			err = dataSync(int(f.f.Fd()))
		}
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: op, Path: f.f.Name(), Err: err}
	}
	return nil
}

// WillNeed asks the kernel to start reading the file into the page cache
// in the background, where the platform has a way to ask (fadviseWillNeed).
func (f *osFile) WillNeed() { fadviseWillNeed(int(f.f.Fd())) }

// Preallocate reserves [off, off+n) with fallocate where the platform and
// the file system have it. Where they do not (errors.ErrUnsupported, which
// EOPNOTSUPP and ENOSYS match), it reserves nothing and returns nil, as the
// File interface says: the log's writer then only writes its zeros.
func (f *osFile) Preallocate(off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := fallocate(int(f.f.Fd()), off, n)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.f.Name(), Err: err}
	}
	return nil
}

// ReadFile reads a whole file from fs.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := Size(f)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("vfs: read %s: %w", name, err)
	}
	return buf[:n], nil
}

// ReadDurableAt implements DurableReader: an O_DIRECT read on Linux,
// ErrNotSupported elsewhere and where the file system refuses O_DIRECT.
func (osFS) ReadDurableAt(name string, p []byte, off int64) (int, error) {
	return readDirect(name, p, off)
}
