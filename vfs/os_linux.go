package vfs

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The Linux calls of OS, each with its portable twin in os_other.go. The
// store's durability promise rests on these: FORMAT.md's file system
// assumptions are Linux's.

// dataSyncOp names dataSync in errors.
const dataSyncOp = "fdatasync"

// dataSync makes a file's data durable, and its size when it changed,
// without the rest of its metadata (times): fdatasync(2).
func dataSync(fd int) error { return unix.Fdatasync(fd) }

// fadviseWillNeed is posix_fadvise WILLNEED over the whole file. Linux
// starts only about the device's read-ahead size of it (read_ahead_kb;
// bench/RESULTS.md has the measurement); the rest comes from the kernel's
// read-ahead for sequential reads, which the readers' large reads start.
// It is a hint, and its error is of no use to the caller.
func fadviseWillNeed(fd int) { _ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED) }

// fallocate reserves [off, off+n) and extends the file with zeros when
// off+n is past its end (mode 0). A file system without it fails with
// EOPNOTSUPP, which matches errors.ErrUnsupported.
func fallocate(fd int, off, n int64) error { return unix.Fallocate(fd, 0, off, n) }

// freeSpace returns the bytes an unprivileged writer may still allocate on
// the file system holding dir: statfs(2)'s available blocks (f_bavail,
// which leaves out the blocks reserved for root) times its block size.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	for {
		err := unix.Statfs(dir, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
		}
		return int64(st.Bavail) * int64(st.Bsize), nil
	}
}

// inotifyWatch is a DirWatch through inotify: it wakes on writes to the
// files in the directory, and on files created, moved in or out, or
// removed.
type inotifyWatch struct {
	f *os.File
}

func watchDirOS(dir string) (DirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "inotify_init", Path: dir, Err: err}
	}
	// A non-blocking descriptor gives a File that the runtime's poller
	// serves, so that a read can be cut short by a deadline.
	f := os.NewFile(uintptr(fd), "inotify")
	const mask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO |
		unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	return &inotifyWatch{f: f}, nil
}

func (w *inotifyWatch) Wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { w.f.SetReadDeadline(time.Now()) })
	defer stop()
	var buf [4096]byte
	n, err := w.f.Read(buf[:])
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func (w *inotifyWatch) Close() error { return w.f.Close() }

// lockTable: /proc/locks lists the holders of flocks.
const lockTable = true

// lockHolder is LockHolder on the OS: the file's device and inode from
// stat, looked up in /proc/locks.
func lockHolder(name string) int {
	var st unix.Stat_t
	if unix.Stat(name, &st) != nil {
		return 0
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	dev := uint64(st.Dev)
	return flockHolder(table, unix.Major(dev), unix.Minor(dev), st.Ino)
}

// directAlign is the alignment of an O_DIRECT read's offset, length and
// buffer: a page, which is a multiple of every device's logical block.
const directAlign = 4096

// readDirect reads len(p) bytes of name at off with O_DIRECT: from the
// device, not the page cache (the kernel writes the range's dirty pages
// back first). A file system that refuses O_DIRECT (tmpfs refuses the
// open) gives ErrNotSupported.
func readDirect(name string, p []byte, off int64) (int, error) {
	var st unix.Stat_t
	fd, err := openRegularFD(name, unix.O_RDONLY|unix.O_DIRECT, &st)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return 0, ErrNotSupported
		}
		return 0, err
	}
	defer unix.Close(fd)
	start := off &^ (directAlign - 1)
	end := (off + int64(len(p)) + directAlign - 1) &^ (directAlign - 1)
	if end <= start {
		return 0, nil
	}
	// An anonymous mapping is page-aligned, as O_DIRECT needs its buffer.
	buf, err := unix.Mmap(-1, 0, int(end-start), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, &os.PathError{Op: "mmap", Path: name, Err: err}
	}
	defer unix.Munmap(buf)
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], start+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL && n == 0 {
			return 0, ErrNotSupported // refused at the read rather than the open
		}
		if err != nil {
			return 0, &os.PathError{Op: "pread (O_DIRECT)", Path: name, Err: err}
		}
		n += m
		if m == 0 || m%directAlign != 0 {
			break // the end of the file
		}
	}
	skip := off - start
	if int64(n) <= skip {
		return 0, io.EOF
	}
	c := copy(p, buf[skip:n])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}
