package recovery

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
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
	// Skip is the revision of the skip record the repair writes at the end
	// of the log: above every revision any file in the directory, its
	// evidence included, holds or may have held, so that no revision is
	// ever given twice (a fencing token taken before the repair stays
	// stale). The repaired store's next write gets Skip+1.
	Skip record.Revision
	// Floor says how Skip was found, in words.
	Floor string
	// Dropped lists every readable record the repair gives up (after the
	// cut, or in a segment set aside), DroppedEntries every readable entry
	// of a snapshot set aside, and Unreadable the damaged ranges given up,
	// in words: what the repair drops, key by key and revision by
	// revision, as far as it can be read (kv DIR dump --salvage reads the
	// same).
	Dropped        []DroppedRecord
	DroppedEntries []DroppedEntry
	Unreadable     []string
	// LostKeys lists, for a snapshot rewritten with the entries that read
	// (see PlanRepair), the key ranges its damage lost: every key strictly
	// between After and Before (nil: unbounded). It is not nil when the
	// snapshot is rewritten, even when its damage lost no key (an image
	// damaged only in its index or footer).
	LostKeys []snapshot.Lost
	// KeptEntries and SnapshotCount are, for a snapshot rewritten with
	// the entries that read, how many read and how many its first record
	// counts.
	KeptEntries, SnapshotCount uint64
	// Evidence lists the files the plan keeps as evidence, in the order
	// of its steps.
	Evidence []Evidence
	actions  []func(fsys vfs.FS) error
	// lostNewest: the newest segment is missing, and with it every trace
	// of the revisions it held (see floor).
	lostNewest bool
}

// Evidence is a file a repair keeps as evidence: moved whole to To
// (Moved), or copied to To before it is cut at offset Cut, or (Cut < 0)
// before it is written again.
type Evidence struct {
	File, To string
	Moved    bool
	Cut      int64
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
//
// A damaged marker (ErrMarkerCorrupt) is moved aside and written again,
// after the rest of the plan; when it is the only damage, the plan ends
// the log with a skip first, as every repair does.
//
// A segment whose header names a format version this build does not
// read (Report.LogFormatErr) gets no plan: PlanRepair returns an error
// matching wal.ErrVersion, as that segment is no damage.
func PlanRepair(fsys vfs.FS, dir string) (*RepairPlan, error) {
	rep, err := Check(fsys, dir)
	if err != nil {
		return nil, err
	}
	if rep.Clean() {
		return &RepairPlan{}, nil
	}
	if err := rep.LogFormatErr(); err != nil {
		// A repair would cut the log at a segment that holds records a
		// build that reads its version can replay.
		return nil, fmt.Errorf("%w; its header's checksums hold, so a build that reads that version wrote it, not damage: open the directory with that build (no repair planned, nothing changed)", err)
	}
	var p *RepairPlan
	if rep.MarkerErr != nil && len(rep.Problems) == 1 {
		p, err = planMarkerOnly(fsys, dir, rep)
	} else {
		p, err = planLog(fsys, dir, rep)
		if err == nil && p.LostKeys != nil {
			err = p.noteRewrite(fsys, dir)
		}
	}
	if err != nil || rep.MarkerErr == nil {
		return p, err
	}
	// The marker last, before the plan's final directory sync: until it
	// is replaced, recovery refuses the directory, so no crash leaves it
	// recoverable without the rest of the repair.
	last := len(p.actions) - 1
	syncDesc, syncAction := p.Steps[last], p.actions[last]
	p.Steps, p.actions = p.Steps[:last], p.actions[:last]
	if err := p.moveAside(fsys, path.Join(dir, MarkerName)); err != nil {
		return nil, err
	}
	p.add("write a new "+path.Join(dir, MarkerName), func(fsys vfs.FS) error { return writeMarker(fsys, dir) })
	p.add(syncDesc, syncAction)
	return p, nil
}

// noteRewrite records, for a plan that writes the snapshot again with the
// entries that read (planSnapshotKeep), its evidence and how many entries
// it keeps of how many.
func (p *RepairPlan) noteRewrite(fsys vfs.FS, dir string) error {
	name := path.Join(dir, snapshot.Name)
	sv, err := image.SalvageAny(fsys, name, nil)
	if err != nil {
		return err
	}
	to, err := brokenName(fsys, name)
	if err != nil {
		return err
	}
	p.Evidence = append(p.Evidence, Evidence{File: name, To: to, Cut: -1})
	p.KeptEntries, p.SnapshotCount = uint64(sv.Entries), sv.Meta.Count
	return nil
}

// planMarkerOnly plans the repair of a directory whose only damage is its
// marker: the log ends with a skip, as after every repair, and keeps
// every record.
func planMarkerOnly(fsys vfs.FS, dir string, rep *Report) (*RepairPlan, error) {
	p := &RepairPlan{KeepThrough: rep.Snapshot.Revision}
	var last *SegmentReport
	for i, s := range rep.Segments {
		if !s.Covered {
			p.KeepThrough = max(p.KeepThrough, s.LastRev)
			last = &rep.Segments[i]
		}
	}
	if last == nil {
		return nil, fmt.Errorf("recovery: no plan for %v", rep.Problems)
	}
	if err := p.floor(fsys, dir); err != nil {
		return nil, err
	}
	p.skipAtEnd(dir, *last, skipPayload(p.Skip))
	p.add("sync "+dir, func(fsys vfs.FS) error { return vfs.SyncDir(fsys, dir) })
	return p, nil
}

// planLog plans the repair of damage in the log or the snapshot.
func planLog(fsys vfs.FS, dir string, rep *Report) (*RepairPlan, error) {
	p := &RepairPlan{}
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
		if !rep.HasSnapshot && pr.File == path.Join(dir, snapshot.Name) {
			// The snapshot is missing and the log starts after
			// log.000001 (checkLive): the log breaks before its first
			// segment.
			cutSeg, cutOff = 1, -1
			break
		}
	}
	if cutSeg == 0 {
		return nil, fmt.Errorf("recovery: no plan for %v", rep.Problems)
	}
	if plan, ok, err := planAfterSeal(fsys, dir, rep, p, cutSeg, cutOff); ok || err != nil {
		return plan, err
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
	// A missing segment with no segment after it (the newest deleted, or
	// every segment of a store without a snapshot): no file left shows
	// the revisions it held.
	if cutOff < 0 && len(later) == 0 {
		p.lostNewest = true
	}
	if err := p.floor(fsys, dir); err != nil {
		return nil, err
	}
	skip := skipPayload(p.Skip)
	if cutOff >= 0 {
		name := wal.SegmentPath(dir, cutSeg)
		to, err := brokenName(fsys, name)
		if err != nil {
			return nil, err
		}
		p.Evidence = append(p.Evidence, Evidence{File: name, To: to, Cut: cutOff})
		p.add(fmt.Sprintf("copy %s to %s, then write a skip to revision %d at offset %d and cut the rest", name, to, p.Skip, cutOff), func(fsys vfs.FS) error {
			// copyFile returns once the copy is durable under its name:
			// only then may the original lose its tail.
			if err := copyFile(fsys, name, to); err != nil {
				return err
			}
			// The skip is durable before the damage goes (RepairTail):
			// a log that recovers without it would give revisions again.
			return wal.RepairTail(fsys, dir, cutSeg, cutOff, skip)
		})
		p.Drops = append(p.Drops, fmt.Sprintf("the rest of %s from offset %d: every record after revision %d in it", wal.SegmentName(cutSeg), cutOff, keep))
		if err := p.listRecords(fsys, name, cutSeg, cutOff); err != nil {
			return nil, err
		}
	} else if prev, ok := liveSegment(rep, cutSeg-1); ok && !prev.Sealed {
		// A segment is missing after one that is not sealed: that one
		// becomes the newest once the later ones are set aside, and the
		// skip goes at its end first (until then, unsealed and not the
		// newest, it keeps the log refused).
		p.skipAtEnd(dir, prev, skip)
	} else {
		// A segment is missing after a sealed one, or right after the
		// snapshot's (which implies it was created before the snapshot
		// was written): a new one takes its number and the skip, before
		// the later segments are set aside (until they are, the new one,
		// unsealed and not the newest, keeps the log refused).
		p.add(fmt.Sprintf("create %s holding a skip to revision %d", wal.SegmentPath(dir, cutSeg), p.Skip), func(fsys vfs.FS) error {
			return createWithSkip(fsys, dir, cutSeg, skip)
		})
	}
	for _, s := range later {
		if err := p.moveAside(fsys, wal.SegmentPath(dir, s)); err != nil {
			return nil, err
		}
		if err := p.listRecords(fsys, wal.SegmentPath(dir, s), s, 0); err != nil {
			return nil, err
		}
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

// planAfterSeal plans the repair of a sealed segment whose records are all
// intact and whose damage lies after its seal: only those bytes go, and
// every segment is kept. It reports false when the damage is elsewhere.
func planAfterSeal(fsys vfs.FS, dir string, rep *Report, p *RepairPlan, cutSeg wal.SegmentNum, cutOff int64) (*RepairPlan, bool, error) {
	var live []SegmentReport
	afterSeal := false
	for _, s := range rep.Segments {
		if s.Covered {
			continue
		}
		live = append(live, s)
		if s.Segment == cutSeg && s.Sealed && cutOff >= s.End {
			afterSeal = true
		}
	}
	if !afterSeal || len(live) == 0 {
		return nil, false, nil
	}
	p.KeepThrough = rep.Snapshot.Revision
	for _, s := range live {
		p.KeepThrough = max(p.KeepThrough, s.LastRev)
	}
	if err := p.floor(fsys, dir); err != nil {
		return nil, true, err
	}
	// The skip first, at the end of the log: until the damage is cut,
	// recovery refuses the directory.
	p.skipAtEnd(dir, live[len(live)-1], skipPayload(p.Skip))
	name := wal.SegmentPath(dir, cutSeg)
	to, err := brokenName(fsys, name)
	if err != nil {
		return nil, true, err
	}
	p.Evidence = append(p.Evidence, Evidence{File: name, To: to, Cut: cutOff})
	p.add(fmt.Sprintf("copy %s to %s, then cut it at offset %d, after its seal", name, to, cutOff), func(fsys vfs.FS) error {
		// copyFile returns once the copy is durable under its name: only
		// then may the original lose its tail.
		if err := copyFile(fsys, name, to); err != nil {
			return err
		}
		return truncate(fsys, name, cutOff)
	})
	p.add("sync "+dir, func(fsys vfs.FS) error { return vfs.SyncDir(fsys, dir) })
	return p, true, nil
}

// liveSegment returns the report of segment seg when it exists and the
// snapshot does not cover it.
func liveSegment(rep *Report, seg wal.SegmentNum) (SegmentReport, bool) {
	for _, s := range rep.Segments {
		if s.Segment == seg && !s.Covered {
			return s, true
		}
	}
	return SegmentReport{}, false
}

// skipAtEnd adds the step that ends the log, whose newest segment is last,
// with a skip record: after its valid records, or in a new segment when
// it is sealed.
func (p *RepairPlan) skipAtEnd(dir string, last SegmentReport, skip []byte) {
	if last.Sealed {
		p.add(fmt.Sprintf("create %s holding a skip to revision %d", wal.SegmentPath(dir, last.Segment+1), p.Skip), func(fsys vfs.FS) error {
			return createWithSkip(fsys, dir, last.Segment+1, skip)
		})
		return
	}
	p.add(fmt.Sprintf("write a skip to revision %d at the end of %s (offset %d)", p.Skip, wal.SegmentPath(dir, last.Segment), last.End), func(fsys vfs.FS) error {
		return wal.RepairTail(fsys, dir, last.Segment, last.End, skip)
	})
}

// planSnapshot sets a damaged snapshot aside. The segments it covered are
// gone, so the repaired store starts from an empty snapshot that covers
// what precedes the remaining run of segments.
func planSnapshot(fsys vfs.FS, dir string, rep *Report, p *RepairPlan) (*RepairPlan, error) {
	if plan, ok, err := planSnapshotKeep(fsys, dir, rep, p); ok || err != nil {
		return plan, err
	}
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
	// The log resumes after the record before the first kept one.
	base := record.Revision(0)
	if meta, err := image.ReadAnyMeta(fsys, path.Join(dir, snapshot.Name)); err == nil {
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
	if err := p.floor(fsys, dir); err != nil {
		return nil, err
	}
	skip := skipPayload(p.Skip)
	// The skip first: until the damaged snapshot is set aside (and, when
	// the log does not start at segment 1, until the new snapshot is
	// written), recovery refuses the directory, so no crash leaves it
	// recoverable without the skip.
	if start < len(segs) {
		p.skipAtEnd(dir, segs[len(segs)-1], skip)
	} else {
		p.add(fmt.Sprintf("create %s holding a skip to revision %d", wal.SegmentPath(dir, first), p.Skip), func(fsys vfs.FS) error {
			return createWithSkip(fsys, dir, first, skip)
		})
	}
	if err := p.moveAside(fsys, path.Join(dir, snapshot.Name)); err != nil {
		return nil, err
	}
	p.Drops = append(p.Drops, "every key stored in the snapshot")
	if err := p.listSnapshot(fsys, path.Join(dir, snapshot.Name)); err != nil {
		return nil, err
	}
	for _, s := range segs[:start] {
		if err := p.moveAside(fsys, wal.SegmentPath(dir, s.Segment)); err != nil {
			return nil, err
		}
		p.Drops = append(p.Drops, fmt.Sprintf("segment %s", wal.SegmentName(s.Segment)))
		if err := p.listRecords(fsys, wal.SegmentPath(dir, s.Segment), s.Segment, 0); err != nil {
			return nil, err
		}
	}
	if first > 1 {
		meta := snapshot.Meta{Covered: first - 1, Revision: base}
		p.add(fmt.Sprintf("write an empty snapshot covering %s at revision %d", wal.SegmentName(first-1), base), func(fsys vfs.FS) error {
			return snapshot.Write(fsys, dir, meta, func(func(*record.Entry) bool) {})
		})
	}
	p.add("sync "+dir, func(fsys vfs.FS) error { return vfs.SyncDir(fsys, dir) })
	return p, nil
}

// minRecordBytes is the smallest a data record can be in the log: n bytes
// of it held at most n/minRecordBytes records, and as many revisions.
const minRecordBytes = wal.HeaderSize + record.MinPayload

// unknownSnapshotMargin is added to the floor when a snapshot's first
// record cannot be read: its revision, the last of the records it holds,
// may be above every revision its entries show (deletes leave no entry).
// It is added too when the newest segment is missing: nothing left shows
// how many records it held (at 33 bytes each, 2^32 of them take 132 GiB).
const unknownSnapshotMargin = 1 << 32

// floor sets p.Skip above every revision that any file of dir holds or may
// have held: log segments, snapshots, the evidence kept of both, and
// snapshot.tmp. Each damaged range of a segment could have held up to
// one revision per minRecordBytes bytes, counted on top of the highest
// revision read anywhere.
func (p *RepairPlan) floor(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	var high record.Revision
	var damaged int64
	unknown := 0
	rd := &wal.Reader{FS: fsys, Dir: dir}
	for _, n := range names {
		base := evidenceOf(n)
		file := path.Join(dir, n)
		if seg, ok := wal.ParseSegmentName(base); ok {
			sv, err := rd.Salvage(file, seg, func(r wal.Record) error {
				if rec, err := record.Decode(r.Payload); err == nil {
					high = max(high, rec.Revision)
				}
				return nil
			})
			if err != nil {
				return err
			}
			damaged += sv.DamagedBytes()
			continue
		}
		if base != snapshot.Name && n != snapshot.TmpName {
			continue
		}
		metaRead := false
		_ = image.ReadAny(fsys, file,
			func(m snapshot.Meta) error { high, metaRead = max(high, m.Revision), true; return nil }, nil,
			func(e *record.Entry) error { high = max(high, e.ModRev); return nil })
		if !metaRead {
			unknown++
		}
	}
	skip := high + record.Revision((damaged+minRecordBytes-1)/minRecordBytes) + 1
	p.Floor = fmt.Sprintf("the highest revision read in any file is %d", high)
	if damaged > 0 {
		p.Floor += fmt.Sprintf("; %d damaged bytes could have held %d more", damaged, (damaged+minRecordBytes-1)/minRecordBytes)
	}
	if unknown > 0 {
		skip += unknownSnapshotMargin * record.Revision(unknown)
		p.Floor += fmt.Sprintf("; %d snapshot(s) whose revision is unreadable add %d each", unknown, unknownSnapshotMargin)
	}
	if p.lostNewest {
		skip += unknownSnapshotMargin
		p.Floor += fmt.Sprintf("; the missing newest segment could have held %d more", unknownSnapshotMargin)
	}
	if skip > record.MaxRevision || skip < high {
		return fmt.Errorf("recovery: a repair would need revision %d, past the largest a store can hold", skip)
	}
	p.Skip = skip
	return nil
}

// evidenceOf returns the name of the file that name is kept evidence of
// (log.000003 for log.000003.broken.2), or name itself.
func evidenceOf(name string) string {
	name = strings.TrimSuffix(name, ".tmp")
	if i := strings.Index(name, BrokenSuffix); i >= 0 {
		return name[:i]
	}
	return name
}

// skipPayload is the payload of a skip record to revision rev.
func skipPayload(rev record.Revision) []byte {
	return record.Append(nil, &record.Record{Revision: rev, Skip: true})
}

// createWithSkip creates segment seg holding one record, payload, synced
// and vouched for by a mark.
func createWithSkip(fsys vfs.FS, dir string, seg wal.SegmentNum, payload []byte) error {
	w, err := wal.Create(fsys, dir, seg, wal.Options{})
	if err != nil {
		return err
	}
	if _, err := w.Append(payload); err != nil {
		w.Close()
		return err
	}
	// The record durable, and a mark after it, synced, that vouches for
	// it to a read-only open (wal.Writer.Vouch).
	if err := w.Vouch(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
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
	p.Evidence = append(p.Evidence, Evidence{File: name, To: to, Moved: true})
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
	return vfs.Publish(fsys, path.Dir(to), path.Base(to), func(w io.Writer) error {
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
