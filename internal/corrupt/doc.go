// Package corrupt is the one marker of damage that a crash cannot cause,
// shared by every file type of the store, and the error that says where
// the damage is.
//
// # Guarantees
//
// Each package that reads a file declares its own sentinel with New
// ("wal: corrupt log", "snapshot: corrupt snapshot"); every such sentinel,
// and every error that wraps one, matches ErrCorruption with errors.Is, so
// Is is the one classifier: a new file type needs no edit anywhere else.
// An *Error carries the damaged file and byte offset as fields, and the
// reason in a few words; it matches the sentinel it wraps.
//
// An *Error may wrap a sentinel that is not a corruption marker, such as
// a package's ErrVersion (a format version this build does not read): it
// then still names the file and offset, and Is reports false. A version
// mismatch is not damage, and repairing it would destroy a good file.
//
// # Crash contract
//
// None: the package holds no state and touches no file.
//
// # Usage
//
//	var ErrCorrupt = corrupt.New("wal: corrupt log")
//	...
//	return &corrupt.Error{Err: ErrCorrupt, File: name, Offset: off, Reason: "checksum mismatch"}
//	...
//	if corrupt.Is(err) { ... } // any package's damage
package corrupt
