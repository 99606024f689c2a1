package corrupt

import (
	"errors"
	"fmt"
)

// ErrCorruption is the marker that every sentinel New returns matches: an
// error matches it when it reports damage that a crash cannot cause, in
// any file of the store.
var ErrCorruption = errors.New("corruption")

// sentinel is a package's corruption sentinel: it prints its own message
// and matches ErrCorruption.
type sentinel struct{ msg string }

func (s *sentinel) Error() string { return s.msg }

// Is makes the sentinel match ErrCorruption.
func (s *sentinel) Is(target error) bool { return target == ErrCorruption }

// New returns a new corruption sentinel whose message is msg, prefixed
// with its package ("wal: corrupt log"). It is a distinct error, for
// callers that ask which file type is damaged, and it matches
// ErrCorruption.
func New(msg string) error { return &sentinel{msg: msg} }

// Is reports whether err reports damage that a crash cannot cause: whether
// it matches ErrCorruption.
func Is(err error) bool { return errors.Is(err, ErrCorruption) }

// Error describes damage found in a file: which file, at which byte
// offset, and why. It matches its sentinel Err (such as wal.ErrCorrupt)
// with errors.Is, and through it ErrCorruption.
type Error struct {
	Err    error  // the sentinel this error matches
	File   string // path of the damaged file
	Offset int64  // byte offset of the damage; -1 when it concerns the whole file
	Reason string // what is wrong, in a few words
}

// Error implements error.
func (e *Error) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("%v: %s: %s", e.Err, e.File, e.Reason)
	}
	return fmt.Sprintf("%v: %s at offset %d: %s", e.Err, e.File, e.Offset, e.Reason)
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }
