package recovery

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvstore/kv/internal/corrupt"
)

// IsCorrupt reports whether err reports damage that a crash cannot cause,
// in any file of the directory: a segment (wal.ErrCorrupt), a record
// (record.ErrCorrupt), the snapshot (snapshot.ErrCorrupt), or any other
// file type whose sentinel is made with corrupt.New. Recovery changes
// nothing in the directory when it returns such an error. A format
// version this build does not read (wal.ErrVersion, snapshot.ErrVersion)
// is not corruption.
func IsCorrupt(err error) bool { return corrupt.Is(err) }

// ErrBusy is matched by the error of a read-only Recover, and of Check,
// that gave up because the directory changed under every attempt to read
// it (a live writer rotating, appending and checkpointing faster than a
// reader can read): it says nothing about the directory's health, so it
// is not corruption (IsCorrupt is false); trying again, or once the
// writer stops, reads it. The error is a *BusyError.
var ErrBusy = errors.New("recovery: directory busy")

// BusyError is the error of a reader that gave up on a directory that
// kept changing. It matches ErrBusy, and not the failure of its last
// attempt (Last), which a writer that moved on explains.
type BusyError struct {
	Dir      string
	Attempts int
	Elapsed  time.Duration
	// Last is the failure of the last attempt, for diagnosis only: a
	// view of the directory taken while it changed.
	Last error
}

// Error implements error.
func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is changing faster than a reader can read it (%d attempts over %v): try again, or stop the writer",
		e.Dir, e.Attempts, e.Elapsed.Round(time.Millisecond))
}

// Unwrap returns ErrBusy.
func (e *BusyError) Unwrap() error { return ErrBusy }
