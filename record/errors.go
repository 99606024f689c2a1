package record

import (
	"errors"

	"github.com/kvstore/kv/internal/corrupt"
)

// ErrCorrupt is returned by Decode when a payload does not follow the
// record format: a length past the end, an unknown kind, trailing bytes,
// a revision of 0 or above MaxRevision. Recovery wraps it in a
// *corrupt.Error naming the segment and the record's offset. It matches
// corrupt.ErrCorruption (recovery.IsCorrupt).
var ErrCorrupt = corrupt.New("record: malformed record")

// ErrNotInteger is returned by Apply when an add meets a value that is not
// a decimal int64.
var ErrNotInteger = errors.New("record: value is not a decimal integer")

// ErrOverflow is returned by Apply when an add would overflow int64.
var ErrOverflow = errors.New("record: integer overflow")
