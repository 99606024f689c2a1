package killdriver

import (
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirWatch notes when a process first changes a data directory (a file
// created, written, renamed or removed; the lock file does not count),
// through inotify. The kill driver uses it on recoveries that run to the
// end, to learn when recovery starts writing on this machine and aim its
// kills there rather than at the start-up of the process.
type dirWatch struct {
	f     *os.File
	mu    sync.Mutex
	first time.Time
	done  chan struct{}
}

// watchDir starts watching dir.
func watchDir(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	mask := uint32(unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO)
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking descriptor goes through the runtime's poller, so that
	// Close ends a Read in progress.
	w := &dirWatch{f: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{})}
	go w.read()
	return w, nil
}

func (w *dirWatch) read() {
	defer close(w.done)
	buf := make([]byte, 4096)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		now := time.Now()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			if string(name) == lockName {
				continue
			}
			w.mu.Lock()
			if w.first.IsZero() {
				w.first = now
			}
			w.mu.Unlock()
			return
		}
	}
}

// stop ends the watch and returns when the first change was seen (zero if
// none was).
func (w *dirWatch) stop() time.Time {
	w.f.Close()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}
