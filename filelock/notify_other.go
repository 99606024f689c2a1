//go:build !linux

package filelock

import (
	"context"
	"errors"
)

// watcher has no events here: waits fall back to their timers.
type watcher struct{}

func newWatcher() (*watcher, error) {
	return nil, errors.New("filelock: no file events on this platform")
}

func (w *watcher) watchFile(path string) error   { return nil }
func (w *watcher) wait(ctx context.Context) bool { <-ctx.Done(); return false }
func (w *watcher) close()                        {}
