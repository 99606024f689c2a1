package kvraft

import (
	"errors"
	"fmt"
)

// ErrKeyNotFound is returned by Get and GetUint64 for a key that was never
// Set. Its text is exactly "not found", not prefixed with the package as
// the project's other errors are: hashicorp/raft recognises a missing
// stable-store key by comparing err.Error() with "not found" (raft's
// api.go and raft.go), and raft-boltdb's ErrKeyNotFound is the same
// string for the same reason. Test for it with errors.Is.
var ErrKeyNotFound = errors.New("not found")

// ErrCorrupt is returned, wrapped in a *CorruptError naming the index and
// the offset, when a stored log entry does not decode (a version 0, a flag
// this package does not define, a length past the end of the value, bytes
// left over, an index that is not its key's), and by GetUint64 for a
// value that is not 8 bytes. The
// kv store below checksums every record, so it means a bug or a value
// written by something other than this package, never a torn write.
var ErrCorrupt = errors.New("kvraft: corrupt value")

// ErrVersion is returned, wrapped in a *CorruptError, for a log entry
// whose first byte is a format version newer than this package reads. It
// is kept apart from ErrCorrupt: the entry may be sound, written by a
// newer kvraft.
var ErrVersion = errors.New("kvraft: unsupported log entry version")

// ErrBadKey is returned by Set, SetUint64, Get and GetUint64 for an empty
// key.
var ErrBadKey = errors.New("kvraft: empty stable-store key")

// CorruptError says which stored value failed to decode, and where.
// errors.Is(err, ErrCorrupt) (or ErrVersion) holds for it.
type CorruptError struct {
	// Index is the log index whose value failed to decode; 0 when the
	// value was decoded apart from any key (DecodeLog).
	Index uint64
	// Offset is the byte offset in the value where decoding failed.
	Offset int
	// Reason says what was wrong at Offset.
	Reason string
	// Err is ErrCorrupt or ErrVersion.
	Err error
}

func (e *CorruptError) Error() string {
	if e.Index != 0 {
		return fmt.Sprintf("%v: index %d, offset %d: %s", e.Err, e.Index, e.Offset, e.Reason)
	}
	return fmt.Sprintf("%v: offset %d: %s", e.Err, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt or ErrVersion.
func (e *CorruptError) Unwrap() error { return e.Err }

// IsCorrupt reports whether err says a stored log entry failed to decode
// (ErrCorrupt or ErrVersion).
func IsCorrupt(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion)
}
