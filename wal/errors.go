package wal

import (
	"errors"
	"fmt"

	"github.com/kvstore/kv/internal/corrupt"
)

// ErrCorrupt is returned (wrapped in a *CorruptError naming the file and
// offset) when a segment holds damage that a crash cannot cause: a bad
// record followed by a record that proves it was synced, a bad or missing
// record in a sealed segment, a sealed segment cut short, or a gap in
// segment numbers. It matches corrupt.ErrCorruption, as every package's
// corruption sentinel does (recovery.IsCorrupt).
var ErrCorrupt = corrupt.New("wal: corrupt log")

// ErrTooLarge is returned by Append when a payload exceeds the maximum
// record size.
var ErrTooLarge = errors.New("wal: record too large")

// ErrVersion is returned when a segment header names a format version this
// code does not read.
var ErrVersion = errors.New("wal: unsupported format version")

// ErrFailed is returned by every Writer method after a write or sync of the
// writer failed: the writer is fail-stop, since after a failed fsync the
// kernel may have dropped the dirty pages and a retry could report success
// for data that is gone.
var ErrFailed = errors.New("wal: writer failed earlier")

// ErrClosed is returned by Writer methods after Close.
var ErrClosed = errors.New("wal: writer closed")

// CorruptError describes damage found in a file: which file, at which byte
// offset, and why. It matches its sentinel Err (such as ErrCorrupt) with
// errors.Is. It is the store's one located error, corrupt.Error, for every
// file type; a version this build does not read (ErrVersion) is one too,
// located but not corruption.
type CorruptError = corrupt.Error

func corruptf(file string, off int64, format string, args ...any) error {
	return &CorruptError{Err: ErrCorrupt, File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
