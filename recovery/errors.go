package recovery

import (
	"errors"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/wal"
)

// IsCorrupt reports whether err reports damage that a crash cannot cause,
// in a segment, a record or the snapshot. Recovery changes nothing in the
// directory when it returns such an error.
func IsCorrupt(err error) bool {
	return errors.Is(err, wal.ErrCorrupt) || errors.Is(err, snapshot.ErrCorrupt) ||
		errors.Is(err, record.ErrCorrupt)
}
