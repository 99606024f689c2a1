package filelock

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// watcher waits for file system events through inotify: the wake-up that
// replaces polling. A holder's death closes its holder file (the kernel
// closes a dead process's descriptors), a release unlinks it, and a
// writer that commits to the store closes its log segment.
type watcher struct {
	fd int
	f  *os.File
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// A non-blocking descriptor gives a File that the runtime's poller
	// serves, so that a read can be cut short by a deadline.
	return &watcher{fd: fd, f: os.NewFile(uintptr(fd), "inotify")}, nil
}

// watchFile wakes on the last close of a descriptor that wrote (or could
// write) the file, and on its unlink. A probe opens it read-only, so
// probes do not wake anyone.
func (w *watcher) watchFile(path string) error {
	_, err := unix.InotifyAddWatch(w.fd, path, unix.IN_CLOSE_WRITE|unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF)
	return err
}

// wait returns true when an event came, false when ctx ended first.
func (w *watcher) wait(ctx context.Context) bool {
	stop := context.AfterFunc(ctx, func() { w.f.SetReadDeadline(time.Now()) })
	defer stop()
	var buf [4096]byte
	n, err := w.f.Read(buf[:])
	return err == nil && n > 0
}

func (w *watcher) close() { w.f.Close() }
