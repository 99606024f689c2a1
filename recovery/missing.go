package recovery

import (
	"errors"
	"fmt"
	"path"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// checkLive returns the error of step 3 of recovery (FORMAT.md,
// "Recovery") for the live segments of dir: they must be numbered
// covered+1, covered+2, … without a gap (wal.CheckContiguous). When there
// is no snapshot and the log starts after log.000001, what is missing is
// a snapshot, not a segment: a checkpoint deleted the segments before,
// and its snapshot is gone. The error then says so, with the revision
// the log starts at, so that "expected log.000001 before log.000007"
// does not send the user looking for a segment no store would keep.
func checkLive(fsys vfs.FS, dir string, live []wal.SegmentNum, covered wal.SegmentNum, hasSnapshot bool) error {
	err := wal.CheckContiguous(dir, live, covered+1)
	if err == nil || hasSnapshot || covered != 0 || len(live) == 0 || live[0] == 1 {
		return err
	}
	return snapshotMissing(fsys, dir, live[0], err)
}

// errFirst stops a scan at its first record.
var errFirst = errors.New("first record read")

// snapshotMissing is the error of a directory without a snapshot whose
// log starts at segment first: a *wal.CorruptError naming the snapshot,
// with the revision of first's first record when it reads. A log whose
// first record is revision 1 lacks no revision, only the segments before
// first: gap, the segment's error, is returned.
func snapshotMissing(fsys vfs.FS, dir string, first wal.SegmentNum, gap error) error {
	var rev record.Revision
	rd := &wal.Reader{FS: fsys, Dir: dir}
	_, err := rd.Scan(first, true, func(r wal.Record) error {
		rec, err := record.Decode(r.Payload)
		if err != nil {
			return err
		}
		rev = rec.Revision
		return errFirst
	})
	var reason string
	switch {
	case rev > 1:
		reason = fmt.Sprintf("snapshot missing: %s starts at revision %d and nothing covers revisions 1–%d",
			wal.SegmentName(first), rev, rev-1)
	case rev == 1:
		return gap
	case err != nil && !errors.Is(err, errFirst):
		reason = fmt.Sprintf("snapshot missing: the log starts at %s, whose first record does not read, and nothing covers the segments before it",
			wal.SegmentName(first))
	default:
		reason = fmt.Sprintf("snapshot missing: the log starts at %s, which holds no record, and nothing covers the segments before it",
			wal.SegmentName(first))
	}
	return &wal.CorruptError{Err: wal.ErrCorrupt, File: path.Join(dir, snapshot.Name), Offset: -1, Reason: reason}
}
