package snapshot

import (
	"errors"

	"github.com/kvstore/kv/internal/corrupt"
)

// ErrCorrupt is returned, wrapped in a *corrupt.Error naming the file and
// offset, when a snapshot fails a checksum, is cut short, or does not
// follow the format. A snapshot is published only after it is complete
// and synced, so no crash can damage one: any damage is corruption. It
// matches corrupt.ErrCorruption (recovery.IsCorrupt).
var ErrCorrupt = corrupt.New("snapshot: corrupt snapshot")

// ErrVersion is returned, wrapped in a *corrupt.Error naming the file at
// the version's offset, when a snapshot names a format version this code
// does not read. It is not corruption: it does not match
// corrupt.ErrCorruption.
var ErrVersion = errors.New("snapshot: unsupported format version")
