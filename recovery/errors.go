package recovery

import "github.com/kvstore/kv/internal/corrupt"

// IsCorrupt reports whether err reports damage that a crash cannot cause,
// in any file of the directory: a segment (wal.ErrCorrupt), a record
// (record.ErrCorrupt), the snapshot (snapshot.ErrCorrupt), or any other
// file type whose sentinel is made with corrupt.New. Recovery changes
// nothing in the directory when it returns such an error. A format
// version this build does not read (wal.ErrVersion, snapshot.ErrVersion)
// is not corruption.
func IsCorrupt(err error) bool { return corrupt.Is(err) }
