//go:build !linux

package killtest

import (
	"errors"
	"time"
)

// killWatch is the portable twin of the inotify watch in
// killwatch_linux.go: there is none, and the kill driver then sizes its
// window without knowing when recovery starts writing.
type killWatch struct{}

func killWatchDir(dir string) (*killWatch, error) {
	return nil, errors.New("killtest: no directory watch on this platform")
}

func (w *killWatch) stop() time.Time { return time.Time{} }
