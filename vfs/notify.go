package vfs

import (
	"context"
	"time"
)

// DirWatch wakes a waiter when something in a directory may have
// changed: a file in it was written, created, renamed or removed.
type DirWatch interface {
	// Wait returns nil when something may have changed since the watch
	// began or the last Wait returned (a change between two Waits is not
	// missed; a spurious return is allowed), or ctx's error when ctx
	// ends first.
	Wait(ctx context.Context) error
	// Close ends the watch.
	Close() error
}

// Notifier is implemented by a file system that can watch a directory
// for changes, such as OS (inotify) and MemFS.
type Notifier interface {
	WatchDir(dir string) (DirWatch, error)
}

// PollInterval is how often a DirWatch on a file system that is not a
// Notifier wakes.
const PollInterval = 50 * time.Millisecond

// WatchDir returns a watch of dir: the file system's own when it is a
// Notifier, otherwise one that wakes every PollInterval.
func WatchDir(fsys FS, dir string) (DirWatch, error) {
	if n, ok := fsys.(Notifier); ok {
		return n.WatchDir(dir)
	}
	return pollWatch{}, nil
}

// pollWatch wakes every PollInterval.
type pollWatch struct{}

func (pollWatch) Wait(ctx context.Context) error {
	t := time.NewTimer(PollInterval)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (pollWatch) Close() error { return nil }

// WatchDir implements Notifier: through inotify on Linux, by polling
// elsewhere.
func (osFS) WatchDir(dir string) (DirWatch, error) { return watchDirOS(dir) }
