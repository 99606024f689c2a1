package kv

import (
	"fmt"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// RestoreOption configures a Restore.
type RestoreOption func(*restoreConfig)

type restoreConfig struct {
	above Revision
}

// RestoreAbove sets a floor on the restored store's revisions: its next
// write gets a revision above both the backup's and rev. A backup older
// than the store it came from would otherwise give out again the
// revisions that store gave after the backup, fencing tokens included;
// a floor at or above the newest revision the old store gave (kv DIR
// stat on it, or the highest fencing token seen) means no token is ever
// given twice.
//
// The floor is a skip record (FORMAT.md, "Data record payload") in the
// segment that follows the restored snapshot, durable before the
// snapshot is in place: a restored directory never opens below the
// floor. A floor at or below the backup's revision changes nothing; one
// at or above record.MaxRevision (2^63−1), which would leave no revision
// for a write, is refused before anything is created.
func RestoreAbove(rev Revision) RestoreOption {
	return func(c *restoreConfig) { c.above = rev }
}

// restoreSegment creates segment seg of dir, the one that follows the
// restored snapshot, durably (wal.Create syncs it and dir), with a skip
// record at revision skip in it, synced and vouched for by a synced mark,
// unless skip is 0.
func restoreSegment(fsys vfs.FS, dir string, seg wal.SegmentNum, o *Options, skip Revision) error {
	w, err := wal.Create(fsys, dir, seg, o.walOptions())
	if err != nil {
		return err
	}
	if skip > 0 {
		if _, err := w.Append(record.Append(nil, &record.Record{Revision: skip, Skip: true})); err != nil {
			w.Close()
			return err
		}
		// The skip durable, then a mark that vouches for it: a read-only
		// open trusts only the records of the newest segment that a
		// later record claims synced, and would otherwise open below the
		// floor after a power loss (a writable open trusts the skip: it
		// syncs what it finds before it trusts it). Both are durable
		// before the snapshot is in place.
		if err := w.Vouch(); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// checkFloor refuses a floor a store could not continue from: one at or
// above record.MaxRevision leaves no revision for the next write.
func checkFloor(rev Revision) error {
	if rev >= record.MaxRevision {
		return fmt.Errorf("kv: restore above revision %d: the largest revision a store can hold is %d, so the floor must be below it to leave a revision for a write", rev, record.MaxRevision)
	}
	return nil
}
