package kv

import (
	"errors"
	"fmt"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/recovery"
)

// ErrNotFound is returned by Get, Delete and fenced writes when the key
// does not exist, as a *NotFoundError that names the key.
var ErrNotFound = errors.New("kv: key not found")

// NotFoundError is the error of Get and Delete (and their fenced forms)
// on a key that does not exist. It matches ErrNotFound.
type NotFoundError struct {
	Key []byte
}

// Error implements error, with the key Go-quoted (an empty key shows as
// "").
func (e *NotFoundError) Error() string { return fmt.Sprintf("kv: key %q not found", e.Key) }

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// ErrClosed is returned by every method called after Close, reads
// included. Revision, Len and Stats, which have no error result, return
// zero values then, and Err returns ErrClosed.
var ErrClosed = errors.New("kv: store closed")

// ErrLocked is returned by Open when another process has the directory
// open (its error is a *LockedError naming the holder's pid).
var ErrLocked = errors.New("kv: directory locked by another process")

// ErrNotDataDir is matched by the error of Open on a directory that holds
// files and is not a kv data directory (FORMAT.md, "The data directory"):
// nothing in it was read as data, changed or created. The error is a
// *recovery.NotDataDirError naming the directory and a few of its files.
var ErrNotDataDir = recovery.ErrNotDataDir

// ErrNoStore is matched by the error of Open on a directory that is
// missing or empty when Options.NoCreate or ReadOnly forbids creating a
// store there. The error is a *recovery.NoStoreError naming the
// directory.
var ErrNoStore = recovery.ErrNoStore

// ErrBusy is matched by the error of a read-only Open that gave up
// because a live writer changed the directory under every one of its
// attempts to read it (it tries for a few seconds): no judgment of the
// directory, which is not corrupt for it; open again later. The error is
// a *recovery.BusyError naming the directory, the attempts and the time.
var ErrBusy = recovery.ErrBusy

// ErrFenced is returned by a fenced write when the fence key's revision is
// no longer the token the writer holds: the writer has lost its lock and
// nothing was written. It is distinct from a transaction whose compares
// failed.
var ErrFenced = errors.New("kv: fencing token is stale")

// ErrFailed is returned by every write after a write or sync of the log
// failed, and by every write of the group commit whose write or sync
// failed, even one that its evaluation refused (ErrFenced, ErrNotFound,
// ErrNotInteger, ErrOverflow): that refusal may rest on earlier writes of
// the same group, whose outcome is unknown. The store is fail-stop: it
// does not retry an fsync whose failure may have dropped data, and refuses
// writes until it is reopened, when recovery establishes what is durable.
// Reads go on working. The outcome of a write that failed with ErrFailed
// is unknown, as after a timeout: it may or may not be found after a
// reopen; nothing acknowledged is ever lost.
var ErrFailed = errors.New("kv: store failed and refuses writes until reopened")

// ErrNotInteger is returned by Add when the key's value is not a decimal
// int64.
var ErrNotInteger = errors.New("kv: value is not a decimal integer")

// ErrOverflow is returned by Add when the result would not fit in an int64.
var ErrOverflow = errors.New("kv: integer overflow")

// ErrRevisionsExhausted is returned by a write that needs a revision
// when the store is at record.MaxRevision, the largest revision it can
// hold (FORMAT.md, "Revisions"). Nothing is written, and the store is not
// failed: reads, and transactions whose branch taken has no operations,
// go on working, and it reopens. No store reaches the limit by writing:
// it means that a snapshot or log was crafted or restored with a
// revision near it.
var ErrRevisionsExhausted = errors.New("kv: no revision left: the store is at the largest revision")

// ErrTooLarge is returned, and nothing is committed, when a key or a
// value is over its configured limit (Options.MaxKeySize,
// Options.MaxValueSize), or when a transaction's record would be over the
// log's maximum record size: 16 MiB, or 2×(MaxKeySize+MaxValueSize)+1 KiB
// when that is more. The record counts its encoding (record.Size), about
// 10 bytes per operation and compare besides their keys and values, and
// either branch of a transaction must fit, since which one runs is known
// only when it commits. The store goes on serving.
var ErrTooLarge = errors.New("kv: key or value too large")

// ErrReadOnly is returned by writes to a store opened read-only.
var ErrReadOnly = errors.New("kv: store opened read-only")

// ErrInvalid is returned for a malformed request: an empty key, a
// transaction without operations, an unknown compare.
var ErrInvalid = errors.New("kv: invalid argument")

// ErrBackupCorrupt is returned by ReadBackup, DecodeBackup and Restore,
// in a *CorruptError naming the file and offset, when a backup fails a
// checksum, is cut short, has bytes after its end, or does not follow
// the format (FORMAT.md, "Backup"). It matches recovery.IsCorrupt.
var ErrBackupCorrupt = corrupt.New("kv: corrupt backup")

// ErrBackupVersion is returned, in a *CorruptError naming the file at
// the version's offset, when a backup names a format version this build
// does not read. It is not corruption.
var ErrBackupVersion = errors.New("kv: unsupported backup format version")

// ErrRestoreNotEmpty is returned by Restore when the directory to
// restore into exists and holds a file: Restore makes new directories
// only, and never overwrites a store.
var ErrRestoreNotEmpty = errors.New("kv: restore needs a new or empty directory")

// LockedError is the error Open returns when the directory is locked. It
// matches ErrLocked.
type LockedError struct {
	Dir string
	// PID is the holder's: on Linux from the kernel's table of locks
	// (/proc/locks), elsewhere as it wrote it in LOCK; 0 if unknown.
	PID int
}

// Error implements error.
func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("kv: %s is locked by process %d", e.Dir, e.PID)
	}
	return fmt.Sprintf("kv: %s is locked by another process", e.Dir)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }
