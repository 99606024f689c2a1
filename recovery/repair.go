package recovery

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// BrokenSuffix is appended to the name of every file Repair changes or
// sets aside; the evidence is kept, never deleted or overwritten. When
// NAME.broken exists already (an earlier repair, or a rerun of one that
// crashed), the evidence goes to the first free name among NAME.broken.1,
// NAME.broken.2, ….
const BrokenSuffix = ".broken"

// maxBroken bounds the numbered evidence names tried for one file.
const maxBroken = 10000

// brokenName returns the first free name among name.broken,
// name.broken.1, name.broken.2, …: free means that Stat finds nothing
// under it.
func brokenName(fsys vfs.FS, name string) (string, error) {
	for i := 0; i < maxBroken; i++ {
		cand := name + BrokenSuffix
		if i > 0 {
			cand += "." + strconv.Itoa(i)
		}
		err := mustBeFree(fsys, cand)
		if err == nil {
			return cand, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("recovery: %s%s through .%d all exist; move old evidence away", name, BrokenSuffix, maxBroken-1)
}

// mustBeFree returns nil when nothing exists under name, and an error
// matching fs.ErrExist when something does.
func mustBeFree(fsys vfs.FS, name string) error {
	_, err := fsys.Stat(name)
	switch {
	case err == nil:
		return &fs.PathError{Op: "repair", Path: name, Err: fs.ErrExist}
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return err
}

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
//
// Every file the plan changes is first copied, and every file it sets
// aside is moved, to a free evidence name (see BrokenSuffix) that the plan
// picks and its steps name. The caller must hold the directory's lock
// exclusively (the store's LOCK file) from PlanRepair through Apply, so
// that the names stay free; Apply checks again and refuses to replace
// anything.
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
		to, err := brokenName(fsys, name)
		if err != nil {
			return nil, err
		}
		p.add(fmt.Sprintf("copy %s to %s, then cut it at offset %d", name, to, cutOff), func(fsys vfs.FS) error {
			// copyFile returns once the copy is durable under its name:
			// only then may the original lose its tail.
			if err := copyFile(fsys, name, to); err != nil {
				return err
			}
			return truncate(fsys, name, cutOff)
		})
		p.Drops = append(p.Drops, fmt.Sprintf("the rest of %s from offset %d: every record after revision %d in it", wal.SegmentName(cutSeg), cutOff, keep))
	}
	for _, s := range later {
		if err := p.moveAside(fsys, wal.SegmentPath(dir, s)); err != nil {
			return nil, err
		}
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
	if err := p.moveAside(fsys, path.Join(dir, snapshot.Name)); err != nil {
		return nil, err
	}
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
		if err := p.moveAside(fsys, wal.SegmentPath(dir, s.Segment)); err != nil {
			return nil, err
		}
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

// moveAside adds the step that moves name to a free evidence name.
func (p *RepairPlan) moveAside(fsys vfs.FS, name string) error {
	to, err := brokenName(fsys, name)
	if err != nil {
		return err
	}
	p.add(fmt.Sprintf("move %s to %s", name, to), func(fsys vfs.FS) error {
		// A rename would replace whatever is at to: the name was free
		// when planned, and the lock keeps it so, but evidence is
		// never risked on that.
		if err := mustBeFree(fsys, to); err != nil {
			return err
		}
		// Moved, not copied: the file keeps its bytes under a name
		// recovery ignores. The plan's last step syncs the directory;
		// a crash before it leaves the file under its old name, or the
		// new, and a rerun plans the move again to a free name.
		return fsys.Rename(name, to)
	})
	return nil
}

// copyFile copies from to to, which must not exist, and returns once the
// copy is durable under that name. It never replaces a file: the bytes go
// to a temporary name first (to.tmp, which is not evidence: a stale one is
// left by a copy that crashed before its rename), are synced and renamed
// to to, and the directory is synced (vfs.Publish).
func copyFile(fsys vfs.FS, from, to string) error {
	if err := mustBeFree(fsys, to); err != nil {
		return err
	}
	src, err := fsys.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	return vfs.Publish(fsys, path.Dir(to), path.Base(to), vfs.PublishOptions{}, func(w io.Writer) error {
		if _, err := io.Copy(w, io.NewSectionReader(src, 0, fi.Size())); err != nil {
			return fmt.Errorf("recovery: copy %s to %s: %w", from, to, err)
		}
		return nil
	})
}

func truncate(fsys vfs.FS, name string, size int64) error {
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		// The cut must be durable before the repair reports success: the
		// next open would otherwise find the corrupt record again.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
