package snapshot

import "errors"

// ErrCorrupt is returned, wrapped in a *wal.CorruptError naming the file
// and offset, when a snapshot fails a checksum, is cut short, or does not
// follow the format. A snapshot is published only after it is complete
// and synced, so no crash can damage one: any damage is corruption.
var ErrCorrupt = errors.New("snapshot: corrupt snapshot")

// ErrVersion is returned when a snapshot names a format version this code
// does not read.
var ErrVersion = errors.New("snapshot: unsupported format version")
