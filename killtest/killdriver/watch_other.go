//go:build !linux

package killdriver

import (
	"errors"
	"time"
)

// dirWatch is the portable twin of the inotify watch in
// watch_linux.go: there is none, and the kill driver then sizes its
// window without knowing when recovery starts writing.
type dirWatch struct{}

func watchDir(dir string) (*dirWatch, error) {
	return nil, errors.New("killdriver: no directory watch on this platform")
}

func (w *dirWatch) stop() time.Time { return time.Time{} }
