package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Problem is one finding of Check.
type Problem struct {
	File    string // path of the file concerned
	Offset  int64  // byte offset, or -1 for the whole file
	Reason  string
	Corrupt bool // recovery refuses it: damage a crash cannot cause, or Format; false for a torn tail
	// Format marks a segment whose header names a format version this
	// build does not read, under checksums that hold: no damage (see
	// Report.LogFormatErr).
	Format bool
}

// String formats the problem as "file offset N: reason".
func (p Problem) String() string {
	if p.Offset < 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Reason)
	}
	return fmt.Sprintf("%s offset %d: %s", p.File, p.Offset, p.Reason)
}

// SegmentReport describes one segment as Check found it.
type SegmentReport struct {
	Segment  wal.SegmentNum
	Size     int64 // file size
	End      int64 // end of the valid records
	Records  int   // valid data records
	Sealed   bool
	Covered  bool // the snapshot covers it: recovery deletes it unread
	FirstRev record.Revision
	LastRev  record.Revision
	Torn     bool
	Err      error // the corruption that stopped the scan, if any
}

// Report is what Check found.
type Report struct {
	Dir string
	// Marked reports that the directory holds the marker (MarkerName);
	// a store without one is read too (see DirUnmarked).
	Marked bool
	// MarkerErr is the damage of a marker that does not hold the
	// marker's bytes (ErrMarkerCorrupt), if any.
	MarkerErr   error
	HasSnapshot bool
	Snapshot    snapshot.Meta
	SnapshotErr error
	Segments    []SegmentReport
	Problems    []Problem
	// Keys, Bytes, Revision and Hash (its content hash, FORMAT.md
	// "Content hash") describe the map recovery would build; they are set
	// only when nothing is corrupt.
	Keys     int
	Bytes    int64
	Revision record.Revision
	Hash     record.Hash
	// Leases is the number of live leases recovery would load, and Bound
	// the keys bound to them; set only when nothing is corrupt.
	Leases, Bound int
}

// FormatErr returns the snapshot's error when its header names a format
// version this build does not read (snapshot.ErrVersion), or nil: a
// later build's snapshot, or one whose version bytes are damaged, which
// no check here can tell apart. Either way recovery refuses it, and a
// repair sets it aside, keeping the file as evidence.
func (r *Report) FormatErr() error {
	if errors.Is(r.SnapshotErr, snapshot.ErrVersion) {
		return r.SnapshotErr
	}
	return nil
}

// LogFormatErr returns the error of the first segment recovery would
// read whose header names a format version this build does not read
// (wal.ErrVersion), or nil. Unlike a snapshot's version, a segment's is
// under its header's checksums, which held: no damage wrote it, a build
// that reads that version did. Recovery refuses the directory, and
// PlanRepair refuses to plan a repair of it: the way out is that build.
func (r *Report) LogFormatErr() error {
	for _, s := range r.Segments {
		if !s.Covered && errors.Is(s.Err, wal.ErrVersion) {
			return s.Err
		}
	}
	return nil
}

// Clean reports whether recovery would succeed: no problem is corruption.
// A torn tail is not corruption.
func (r *Report) Clean() bool {
	for _, p := range r.Problems {
		if p.Corrupt {
			return false
		}
	}
	return true
}

// Check verifies the snapshot and every segment of dir without changing
// anything and without a lock. Unlike Recover it does not stop at the first
// problem: it reports each damaged file with the offset of its first bad
// byte. The error is for failures to read at all.
//
// Check may run beside a live writer: a report with a problem is made
// again, and taken only when the next one finds the same problems on an
// unchanged directory (see Recover); one that changes under every
// attempt gives an error matching ErrBusy.
func Check(fsys vfs.FS, dir string) (*Report, error) {
	rep, err := whileStable(fsys, dir, func() (*Report, error) {
		rep, err := checkOnce(fsys, dir)
		if err == nil && !rep.Clean() {
			// The problems in the error's text: whileStable takes a
			// report as the directory's once two in a row say the same.
			return rep, fmt.Errorf("%w: %v", errUnclean, rep.Problems)
		}
		return rep, err
	})
	if errors.Is(err, errUnclean) {
		return rep, nil
	}
	return rep, err
}

// errUnclean makes whileStable look again at a report with problems.
var errUnclean = errors.New("recovery: problems found")

func checkOnce(fsys vfs.FS, dir string) (*Report, error) {
	kind, err := Identify(fsys, dir)
	var markerErr error
	if kind == DirMarked && IsCorrupt(err) {
		markerErr, err = err, nil // reported below, with the rest
	}
	if err != nil {
		return nil, err
	}
	if !kind.HoldsStore() {
		return nil, &NoStoreError{Dir: dir, Missing: kind == DirMissing}
	}
	rep := &Report{Dir: dir, Marked: kind == DirMarked}
	if markerErr != nil {
		rep.Problems = append(rep.Problems, problemOf(markerErr, path.Join(dir, MarkerName)))
		rep.MarkerErr = markerErr
	}
	m, leases := record.NewMap(), record.NewLeases()
	err = image.ReadAny(fsys, path.Join(dir, snapshot.Name),
		func(meta snapshot.Meta) error { rep.Snapshot = meta; return nil },
		func(le *record.Lease) error { return leases.Load(le) },
		func(e *record.Entry) error { m.Load(e); return nil })
	switch {
	case err == nil:
		rep.HasSnapshot = true
		m.SetRevision(rep.Snapshot.Revision)
	case errors.Is(err, fs.ErrNotExist):
	default:
		if !IsCorrupt(err) && !errors.Is(err, snapshot.ErrVersion) {
			return nil, err
		}
		rep.HasSnapshot = true
		rep.SnapshotErr = err
		rep.Problems = append(rep.Problems, problemOf(err, dir+"/"+snapshot.Name))
	}
	segs, err := wal.ListSegments(fsys, dir)
	if err != nil {
		return nil, err
	}
	covered := rep.Snapshot.Covered
	var live []wal.SegmentNum
	for _, s := range segs {
		if s > covered {
			live = append(live, s)
		}
	}
	if err := checkLive(fsys, dir, live, covered, rep.HasSnapshot); err != nil {
		rep.Problems = append(rep.Problems, problemOf(err, ""))
	} else if rep.HasSnapshot && rep.SnapshotErr == nil && len(live) == 0 {
		rep.Problems = append(rep.Problems, Problem{File: wal.SegmentPath(dir, covered+1), Offset: -1, Corrupt: true,
			Reason: fmt.Sprintf("segment missing: the snapshot covers %s", wal.SegmentName(covered))})
	} else if err := firstSegmentMissing(dir, rep.Marked, rep.HasSnapshot, live); err != nil {
		rep.Problems = append(rep.Problems, problemOf(err, ""))
	}
	rd := &wal.Reader{FS: fsys, Dir: dir}
	// Without the snapshot the log starts after it (checkLive): the
	// records are still checked, but not applied to an empty map, which
	// would add a problem for every one of them.
	broken := rep.SnapshotErr != nil || !rep.HasSnapshot && len(live) > 0 && live[0] != 1
	var infos []wal.SegmentInfo // the live segments', while they read whole
	liveBroken := false
	for i, s := range segs {
		sr := SegmentReport{Segment: s, Covered: s <= covered}
		// The newest segment may end torn, and the one before it when a
		// rotation was cut short (see logEnd).
		tail := i >= len(segs)-2 && !sr.Covered
		file := wal.SegmentPath(dir, s)
		apply := !sr.Covered && !broken
		info, err := rd.Scan(s, tail, func(r wal.Record) error {
			rec, err := record.Decode(r.Payload)
			if err != nil {
				return &wal.CorruptError{Err: record.ErrCorrupt, File: file, Offset: r.Offset, Reason: err.Error()}
			}
			if sr.FirstRev == 0 {
				sr.FirstRev = rec.Revision
			}
			sr.LastRev = rec.Revision
			if !apply {
				return nil
			}
			if err := nextRevision(file, r.Offset, &rec, m.Revision()); err != nil {
				return err
			}
			err = leases.Check(&rec)
			if err == nil {
				err = m.Apply(&rec)
			}
			if err == nil {
				err = leases.Apply(&rec)
			}
			if err != nil {
				return &wal.CorruptError{Err: record.ErrCorrupt, File: file, Offset: r.Offset,
					Reason: fmt.Sprintf("record %d cannot be applied: %v", rec.Revision, err)}
			}
			return nil
		})
		sr.Size, sr.End, sr.Records, sr.Sealed, sr.Torn = info.Size, info.End, info.Records, info.Sealed, info.Torn
		if err != nil {
			if !IsCorrupt(err) && !errors.Is(err, wal.ErrVersion) {
				return nil, err
			}
			sr.Err = err
			if n := len(infos); i == len(segs)-1 && n > 0 && !infos[n-1].Sealed && infos[n-1].Segment+1 == s {
				// Damage in the newest segment while the one before it
				// is not sealed: the log breaks first at the end of
				// that one (see Recover).
				err = unsealedBefore(dir, infos[n-1], s)
			}
			if !sr.Covered {
				p := problemOf(err, file)
				p.Format = errors.Is(err, wal.ErrVersion)
				rep.Problems = append(rep.Problems, p)
				broken, liveBroken = true, true
			}
		} else if !sr.Covered {
			infos = append(infos, info)
		}
		rep.Segments = append(rep.Segments, sr)
	}
	if !liveBroken {
		last, _, err := logEnd(dir, infos, rep.Marked)
		switch {
		case err != nil:
			rep.Problems = append(rep.Problems, problemOf(err, ""))
		case last.Torn:
			rep.Problems = append(rep.Problems, Problem{File: wal.SegmentPath(dir, last.Segment), Offset: last.End,
				Reason: "torn tail (crash damage; recovery cuts it): " + last.TornReason})
		}
	}
	if rep.Clean() {
		rep.Keys, rep.Bytes, rep.Revision = m.Len(), m.Bytes(), m.Revision()
		rep.Hash = m.Hash()
		rep.Leases, rep.Bound = leases.Len(), leases.Bound()
	}
	return rep, nil
}

func problemOf(err error, file string) Problem {
	var ce *wal.CorruptError
	if errors.As(err, &ce) {
		return Problem{File: ce.File, Offset: ce.Offset, Reason: fmt.Sprintf("%v: %s", ce.Err, ce.Reason), Corrupt: true}
	}
	return Problem{File: file, Offset: -1, Reason: err.Error(), Corrupt: true}
}
