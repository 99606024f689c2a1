package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// BrokenSuffix is appended to the name of every file Repair changes or
// sets aside; the evidence is kept, never deleted.
const BrokenSuffix = ".broken"

// RepairPlan is what Repair would do to a directory that Recover refuses.
type RepairPlan struct {
	// Steps are the actions in order, in words.
	Steps []string
	// Drops says which committed data the repair gives up, in words; empty
	// when it gives up nothing.
	Drops []string
	// KeepThrough is the last revision that survives the repair.
	KeepThrough record.Revision
	actions     []func(fsys vfs.FS) error
}

// add appends a step and the action that carries it out.
func (p *RepairPlan) add(desc string, action func(fsys vfs.FS) error) {
	p.Steps = append(p.Steps, desc)
	p.actions = append(p.actions, action)
}

// Empty reports whether there is nothing to repair.
func (p *RepairPlan) Empty() bool { return len(p.actions) == 0 }

// PlanRepair works out how to make dir recoverable again, changing
// nothing: it cuts the log at the first corrupt record (dropping that
// segment's rest and every later segment) or, for a damaged snapshot, sets
// it aside and starts from the segments that remain. A torn tail needs no
// repair: recovery cuts it.
func PlanRepair(fsys vfs.FS, dir string) (*RepairPlan, error) {
	rep, err := Check(fsys, dir)
	if err != nil {
		return nil, err
	}
	p := &RepairPlan{}
	if rep.Clean() {
		return p, nil
	}
	segs := rep.Segments
	if rep.SnapshotErr != nil {
		return planSnapshot(fsys, dir, rep, p)
	}
	// The first problem in the live log decides where it is cut.
	cutSeg, cutOff := wal.SegmentNum(0), int64(-1)
	for _, pr := range rep.Problems {
		if !pr.Corrupt {
			continue
		}
		if n, ok := wal.ParseSegmentName(path.Base(pr.File)); ok {
			cutSeg, cutOff = n, pr.Offset
			break
		}
	}
	if cutSeg == 0 {
		return nil, fmt.Errorf("recovery: no plan for %v", rep.Problems)
	}
	keep := rep.Snapshot.Revision
	var later []wal.SegmentNum
	var lastDropped record.Revision
	for _, s := range segs {
		switch {
		case s.Covered:
		case s.Segment < cutSeg:
			keep = max(keep, s.LastRev)
		case s.Segment == cutSeg && cutOff >= 0:
			if s.Err == nil || s.Records > 0 {
				keep = max(keep, s.LastRev)
			}
		default:
			later = append(later, s.Segment)
			lastDropped = max(lastDropped, s.LastRev)
		}
	}
	p.KeepThrough = keep
	if cutOff >= 0 {
		name := wal.SegmentPath(dir, cutSeg)
		p.add(fmt.Sprintf("copy %s to %s, then cut it at offset %d", name, name+BrokenSuffix, cutOff), func(fsys vfs.FS) error {
			if err := copyFile(fsys, name, name+BrokenSuffix); err != nil {
				return err
			}
			return truncate(fsys, name, cutOff)
		})
		p.Drops = append(p.Drops, fmt.Sprintf("the rest of %s from offset %d: every record after revision %d in it", wal.SegmentName(cutSeg), cutOff, keep))
	}
	for _, s := range later {
		name := wal.SegmentPath(dir, s)
		p.add(fmt.Sprintf("move %s to %s", name, name+BrokenSuffix), func(fsys vfs.FS) error { return fsys.Rename(name, name+BrokenSuffix) })
	}
	if cutOff < 0 && rep.HasSnapshot && cutSeg == rep.Snapshot.Covered+1 {
		// The segment after the snapshot's is missing, and every later
		// one is set aside: recovery needs it to exist (the snapshot
		// says it was created before the snapshot was written).
		p.add(fmt.Sprintf("create %s", wal.SegmentPath(dir, cutSeg)), func(fsys vfs.FS) error {
			w, err := wal.Create(fsys, dir, cutSeg, wal.Options{})
			if err != nil {
				return err
			}
			return w.Close()
		})
	}
	if len(later) > 0 {
		d := fmt.Sprintf("segments %s to %s", wal.SegmentName(later[0]), wal.SegmentName(later[len(later)-1]))
		if lastDropped > 0 {
			d += fmt.Sprintf(", through revision %d", lastDropped)
		}
		p.Drops = append(p.Drops, d)
	}
	p.add("sync "+dir, func(fsys vfs.FS) error { return vfs.SyncDir(fsys, dir) })
	return p, nil
}

// planSnapshot sets a damaged snapshot aside. The segments it covered are
// gone, so the repaired store starts from an empty snapshot that covers
// what precedes the remaining run of segments.
func planSnapshot(fsys vfs.FS, dir string, rep *Report, p *RepairPlan) (*RepairPlan, error) {
	name := path.Join(dir, snapshot.Name)
	p.add(fmt.Sprintf("move %s to %s", name, name+BrokenSuffix), func(fsys vfs.FS) error { return fsys.Rename(name, name+BrokenSuffix) })
	p.Drops = append(p.Drops, "every key stored in the snapshot")
	// Keep the newest contiguous run of segments that starts with a record
	// or is empty, and set aside older ones.
	segs := rep.Segments
	start := len(segs)
	for i := len(segs) - 1; i >= 0; i-- {
		if i < len(segs)-1 && segs[i].Segment+1 != segs[i+1].Segment {
			break
		}
		if segs[i].Err != nil {
			break
		}
		start = i
	}
	for _, s := range segs[:start] {
		n := wal.SegmentPath(dir, s.Segment)
		p.add(fmt.Sprintf("move %s to %s", n, n+BrokenSuffix), func(fsys vfs.FS) error { return fsys.Rename(n, n+BrokenSuffix) })
		p.Drops = append(p.Drops, fmt.Sprintf("segment %s", wal.SegmentName(s.Segment)))
	}
	// Revisions must not go backwards: start after the highest revision
	// known, from the damaged snapshot's first record if it is intact.
	base := record.Revision(0)
	if meta, err := snapshot.ReadMeta(fsys, dir); err == nil {
		base = meta.Revision
	}
	first := wal.SegmentNum(1)
	if start < len(segs) {
		first = segs[start].Segment
		for _, s := range segs[start:] {
			if s.FirstRev > 0 {
				base = s.FirstRev - 1
				break
			}
		}
	} else if len(segs) > 0 {
		first = segs[len(segs)-1].Segment + 1
	}
	for _, s := range segs {
		if s.Err == nil && s.LastRev > base && s.Segment < first {
			base = s.LastRev
		}
	}
	p.KeepThrough = base
	if first > 1 {
		meta := snapshot.Meta{Covered: first - 1, Revision: base}
		if start == len(segs) {
			p.add(fmt.Sprintf("create %s", wal.SegmentPath(dir, first)), func(fsys vfs.FS) error {
				w, err := wal.Create(fsys, dir, first, wal.Options{})
				if err != nil {
					return err
				}
				return w.Close()
			})
		}
		p.add(fmt.Sprintf("write an empty snapshot covering %s at revision %d", wal.SegmentName(first-1), base), func(fsys vfs.FS) error {
			return snapshot.Write(fsys, dir, meta, func(func(*record.Entry) bool) {}, snapshot.Options{})
		})
	}
	p.add("sync "+dir, func(fsys vfs.FS) error { return vfs.SyncDir(fsys, dir) })
	return p, nil
}

// Apply carries out the plan, calling step before each action with its
// description.
func (p *RepairPlan) Apply(fsys vfs.FS, step func(string)) error {
	for i, a := range p.actions {
		if step != nil {
			step(p.Steps[i])
		}
		if err := a(fsys); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(fsys vfs.FS, from, to string) error {
	b, err := vfs.ReadFile(fsys, from)
	if err != nil {
		return err
	}
	if err := fsys.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := fsys.Create(to)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	// The evidence must be durable before the original is cut.
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return vfs.SyncDir(fsys, path.Dir(to))
}

func truncate(fsys vfs.FS, name string, size int64) error {
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
