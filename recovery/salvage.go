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

// SalvageReport is what Salvage read of a data directory, and what it
// could not read.
type SalvageReport struct {
	Dir string
	// MarkerErr is the damage of a marker that does not hold the
	// marker's bytes, if any (the directory is read all the same).
	MarkerErr error
	// Map holds every key that the snapshot's readable entries and the
	// log's readable records give, applied in revision order.
	Map *record.Map
	// Snapshot is what was read of the snapshot; nil when there is none.
	Snapshot *snapshot.Salvaged
	// Segments lists every segment file, ascending.
	Segments []SegmentSalvage
	// Missing lists the segments that must exist and do not: gaps in the
	// numbering, the one after the snapshot's, the one after a sealed
	// newest segment (FORMAT.md, "Sealed and newest segments").
	Missing []wal.SegmentNum
	// Gaps lists the revisions that no readable record holds: between the
	// snapshot's and the first record read, and between records.
	Gaps []RevRange
	// Unapplied lists the revisions of records read that could not be
	// applied to what was read before them (an add to a value that is
	// not an integer, after a gap).
	Unapplied []record.Revision
}

// SegmentSalvage is what Salvage read of one segment.
type SegmentSalvage struct {
	Segment wal.SegmentNum
	File    string
	// Covered: the snapshot covers it, and it was not read.
	Covered bool
	wal.Salvaged
	// Undecodable counts records whose frame checks out but whose payload
	// does not decode (they count as damaged).
	Undecodable int
	// FirstRev and LastRev are the revisions of the first and the last
	// record read (0 when none was).
	FirstRev, LastRev record.Revision
}

// RevRange is the revisions From through To.
type RevRange struct{ From, To record.Revision }

// String formats the range as "52" or "52-60".
func (r RevRange) String() string {
	if r.From == r.To {
		return fmt.Sprint(uint64(r.From))
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Whole reports whether nothing was lost: a complete snapshot (or none),
// no damaged byte in any segment, no missing segment, no gap, every
// record applied.
func (r *SalvageReport) Whole() bool {
	if r.MarkerErr != nil || len(r.Missing) > 0 || len(r.Gaps) > 0 || len(r.Unapplied) > 0 {
		return false
	}
	if r.Snapshot != nil && !r.Snapshot.Complete {
		return false
	}
	for _, s := range r.Segments {
		if !s.Covered && (len(s.Damaged) > 0 || s.Undecodable > 0) {
			return false
		}
	}
	return true
}

// Salvage reads every readable record and snapshot entry of dir, whatever
// damage the directory holds, and reports what it could not read: the
// damaged byte ranges of each file, the keys a damaged snapshot range may
// have held, the revisions no readable record holds, the missing
// segments. It changes nothing: it takes no lock, and only lists, opens
// and reads (the tests record every file operation to show it). It
// refuses only a directory that is not a store (ErrNotDataDir, ErrNoStore).
//
// The map it returns is the snapshot's readable entries with the log's
// readable records applied after the snapshot's revision, in order, gaps
// and all: after a gap, any key may differ from what the store held.
func Salvage(fsys vfs.FS, dir string) (*SalvageReport, error) {
	kind, err := Identify(fsys, dir)
	rep := &SalvageReport{Dir: dir, Map: record.NewMap()}
	if kind == DirMarked && IsCorrupt(err) {
		rep.MarkerErr, err = err, nil
	}
	if err != nil {
		return nil, err
	}
	if !kind.HoldsStore() {
		return nil, &NoStoreError{Dir: dir, Missing: kind == DirMissing}
	}
	m := rep.Map
	m.Defer()
	// The snapshot's readable entries.
	var base record.Revision
	var covered wal.SegmentNum
	sv, err := image.SalvageAny(fsys, path.Join(dir, snapshot.Name), func(e *record.Entry) error {
		m.Load(e)
		base = max(base, e.ModRev)
		return nil
	})
	switch {
	case err == nil:
		rep.Snapshot = &sv
		if sv.MetaOK {
			base, covered = sv.Meta.Revision, sv.Meta.Covered
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	m.SetRevision(base)

	// The segments, in order.
	segs, err := wal.ListSegments(fsys, dir)
	if err != nil {
		return nil, err
	}
	want := covered + 1
	rd := &wal.Reader{FS: fsys, Dir: dir}
	var rec record.Record
	for _, s := range segs {
		ss := SegmentSalvage{Segment: s, File: wal.SegmentPath(dir, s), Covered: s <= covered}
		if ss.Covered {
			rep.Segments = append(rep.Segments, ss)
			continue
		}
		for ; want < s; want++ {
			rep.Missing = append(rep.Missing, want)
		}
		want = s + 1
		ss.Salvaged, err = rd.Salvage(ss.File, s, func(r wal.Record) error {
			if err := record.DecodeInto(r.Payload, &rec); err != nil {
				ss.Undecodable++
				return nil
			}
			if ss.FirstRev == 0 {
				ss.FirstRev = rec.Revision
			}
			ss.LastRev = rec.Revision
			rep.apply(&rec)
			return nil
		})
		if err != nil {
			return nil, err
		}
		rep.Segments = append(rep.Segments, ss)
	}
	// No segment after the snapshot's, or none at all in a marked
	// directory: the first that must exist is missing.
	if (len(segs) == 0 || segs[len(segs)-1] <= covered) && (rep.Snapshot != nil && rep.Snapshot.MetaOK || kind == DirMarked) {
		rep.Missing = append(rep.Missing, covered+1)
	}
	// A sealed newest segment: the one after it was deleted (FORMAT.md).
	if n := len(segs); n > 0 && segs[n-1] > covered && kind == DirMarked {
		info, err := (&wal.Reader{FS: fsys, Dir: dir}).Scan(segs[n-1], true, nil)
		if err == nil && info.Sealed {
			rep.Missing = append(rep.Missing, segs[n-1]+1)
		}
	}
	m.Build()
	return rep, nil
}

// apply applies a record read from the log, in log order: one at or
// below the map's revision is covered already; one past the next leaves
// a gap (but for a skip, whose jump is a repair's).
func (rep *SalvageReport) apply(rec *record.Record) {
	m := rep.Map
	cur := m.Revision()
	if rec.Revision <= cur {
		return
	}
	if rec.Revision > cur+1 && !rec.Skip {
		rep.Gaps = append(rep.Gaps, RevRange{From: cur + 1, To: rec.Revision - 1})
	}
	if err := m.Apply(rec); err != nil {
		rep.Unapplied = append(rep.Unapplied, rec.Revision)
		m.SetRevision(rec.Revision)
	}
}
