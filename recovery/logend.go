package recovery

import (
	"fmt"

	"github.com/kvstore/kv/wal"
)

// logEnd finds, among the live segments as Scan read them (infos, in
// order; the last two read as segments that may end torn), the segment
// whose records end the log, and the next segment when a rotation was
// cut short. A rotation creates the next segment durably before it seals
// the current one (FORMAT.md, "Rotation"), so a crash leaves:
//
//   - the newest segment not sealed: it ends the log;
//   - the one before it not sealed (perhaps torn) and the newest holding
//     no record: the rotation was cut short, the one before ends the log
//     and next is the newest;
//
// and never a sealed newest segment: that is a missing segment, refused
// as corruption naming it, unless the directory follows the rules of the
// stores made before the marker (legacy: marked is false), whose rotation
// sealed first. A segment before the newest that is not sealed while the
// newest holds records is corruption at the end of its records.
func logEnd(dir string, infos []wal.SegmentInfo, marked bool) (last wal.SegmentInfo, next *wal.SegmentInfo, err error) {
	n := len(infos)
	if n == 0 {
		return wal.SegmentInfo{}, nil, nil
	}
	newest := infos[n-1]
	if n >= 2 && !infos[n-2].Sealed {
		prev := infos[n-2]
		if !holdsNoRecord(newest) {
			return wal.SegmentInfo{}, nil, unsealedBefore(dir, prev, newest.Segment)
		}
		return prev, &newest, nil
	}
	if newest.Sealed && marked {
		missing := newest.Segment + 1
		return wal.SegmentInfo{}, nil, &wal.CorruptError{Err: wal.ErrCorrupt, File: wal.SegmentPath(dir, missing), Offset: -1,
			Reason: fmt.Sprintf("segment missing: %s is sealed, and a segment is sealed only once the next one exists (the newest segment was deleted, with every record written to it)",
				wal.SegmentName(newest.Segment))}
	}
	return newest, nil, nil
}

// holdsNoRecord reports whether a newest segment, as Scan read it, holds
// nothing but its header (or not even that: zeros, or a header cut short):
// what a rotation that has not sealed the segment before it leaves.
func holdsNoRecord(info wal.SegmentInfo) bool {
	return info.Records == 0 && info.Marks == 0 && !info.Sealed && (info.End == 0 || !info.Torn)
}

// unsealedBefore is the corruption of prev, a segment that is not sealed
// although the segment next after it holds records, or holds damage: a
// rotation writes nothing in the next segment before the seal of prev is
// durable, so the log breaks at the end of prev's records, before
// anything next holds.
func unsealedBefore(dir string, prev wal.SegmentInfo, next wal.SegmentNum) error {
	reason := "sealed segment ends without a seal record, and " + wal.SegmentName(next) + " after it holds records"
	if prev.Torn {
		reason = fmt.Sprintf("%s (the segment ends in damage a crash leaves only in the newest segment: %s)", reason, prev.TornReason)
	}
	return &wal.CorruptError{Err: wal.ErrCorrupt, File: wal.SegmentPath(dir, prev.Segment), Offset: prev.End, Reason: reason}
}
