package recovery

import (
	"errors"
	"fmt"
	"path"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// DroppedRecord is a readable log record that a repair gives up: it lies
// after the cut, or in a segment set aside.
type DroppedRecord struct {
	File   string
	Offset int64
	Record record.Record
}

// DroppedEntry is a readable entry of a snapshot that a repair sets
// aside.
type DroppedEntry struct {
	File  string
	Entry record.Entry
}

// listRecords adds to the plan the records of segment file (seg) that
// start at from or later, and the damaged ranges there, as dropped.
func (p *RepairPlan) listRecords(fsys vfs.FS, file string, seg wal.SegmentNum, from int64) error {
	rd := &wal.Reader{FS: fsys, Dir: path.Dir(file)}
	sv, err := rd.Salvage(file, seg, func(r wal.Record) error {
		if r.Offset < from {
			return nil
		}
		var rec record.Record
		if err := record.DecodeInto(r.Payload, &rec); err != nil {
			p.Unreadable = append(p.Unreadable, fmt.Sprintf("%s offset %d: a record that does not decode (%v)", file, r.Offset, err))
			return nil
		}
		// DecodeInto points into the payload, which Salvage made for
		// this record alone: the record may keep it.
		p.Dropped = append(p.Dropped, DroppedRecord{File: file, Offset: r.Offset, Record: rec})
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range sv.Damaged {
		if d.To <= from {
			continue
		}
		lo := max(d.From, from)
		p.Unreadable = append(p.Unreadable, fmt.Sprintf("%s bytes %d-%d (up to %d records)",
			file, lo, d.To, (d.To-lo+minRecordBytes-1)/minRecordBytes))
	}
	return nil
}

// listSnapshot adds to the plan the readable entries of the snapshot file
// as dropped, and its damaged ranges.
func (p *RepairPlan) listSnapshot(fsys vfs.FS, file string) error {
	sv, err := image.SalvageAny(fsys, file, func(e *record.Entry) error {
		c := *e
		c.Key, c.Value = append([]byte(nil), e.Key...), append([]byte(nil), e.Value...)
		p.DroppedEntries = append(p.DroppedEntries, DroppedEntry{File: file, Entry: c})
		return nil
	})
	if err != nil {
		return err
	}
	p.listLost(file, sv)
	return nil
}

// listLost adds the damaged ranges of a snapshot to the plan.
func (p *RepairPlan) listLost(file string, sv snapshot.Salvaged) {
	for _, l := range sv.Lost {
		p.Unreadable = append(p.Unreadable, fmt.Sprintf("%s bytes %d-%d (the keys %s, if any)", file, l.From, l.To, keySpan(l.After, l.Before)))
	}
	for _, l := range sv.Index {
		p.Unreadable = append(p.Unreadable, fmt.Sprintf("%s bytes %d-%d (the image's index or footer: no key)", file, l.From, l.To))
	}
}

// keySpan words the keys strictly between after and before, Go-quoted
// (nil: no bound).
func keySpan(after, before []byte) string {
	switch {
	case after == nil && before == nil:
		return "of the whole snapshot"
	case after == nil:
		return fmt.Sprintf("before %q", before)
	case before == nil:
		return fmt.Sprintf("after %q", after)
	}
	return fmt.Sprintf("between %q and %q", after, before)
}

// planSnapshotKeep plans the repair of a snapshot whose first record
// reads and whose damage lies in its entries, when it holds no lease and
// the log after it is sound: the entries that read are kept. The plan
// ends the log with a skip, as every repair, then copies the snapshot to
// evidence and publishes in its place a snapshot with the same first
// record (coverage and revision) and every entry that reads, so that
// only the keys in the damaged ranges are lost (the snapshot's entries
// are in key order, so those keys are known to lie between two that
// read). It reports false when the snapshot or the log does not allow it.
func planSnapshotKeep(fsys vfs.FS, dir string, rep *Report, p *RepairPlan) (*RepairPlan, bool, error) {
	name := path.Join(dir, snapshot.Name)
	sv, err := image.SalvageAny(fsys, name, nil)
	if err != nil {
		return nil, false, err
	}
	if !sv.MetaOK || sv.Meta.Leases > 0 || sv.Leases > 0 || sv.LeasesUnknown || sv.Disordered > 0 || errors.Is(rep.SnapshotErr, snapshot.ErrVersion) {
		return nil, false, nil
	}
	for _, pr := range rep.Problems {
		if pr.Corrupt && pr.File != name && pr.File != path.Join(dir, MarkerName) {
			return nil, false, nil // the log is damaged too
		}
	}
	meta := sv.Meta
	// The log must go on from the snapshot: segments covered+1 on, the
	// first record read in them the snapshot's revision + 1 (or a skip).
	var live []SegmentReport
	for _, s := range rep.Segments {
		if s.Segment > meta.Covered {
			live = append(live, s)
		}
	}
	if len(live) == 0 || live[0].Segment != meta.Covered+1 {
		return nil, false, nil
	}
	keep := meta.Revision
	for _, s := range live {
		if s.FirstRev > 0 && keep == meta.Revision && s.FirstRev != meta.Revision+1 {
			return nil, false, nil
		}
		keep = max(keep, s.LastRev)
	}
	p.KeepThrough = keep
	if err := p.floor(fsys, dir); err != nil {
		return nil, true, err
	}
	// The skip first: until the snapshot is replaced, recovery refuses
	// the directory, so no crash leaves it recoverable without the skip.
	p.skipAtEnd(dir, live[len(live)-1], skipPayload(p.Skip))
	to, err := brokenName(fsys, name)
	if err != nil {
		return nil, true, err
	}
	meta.Count = uint64(sv.Entries)
	p.add(fmt.Sprintf("copy %s to %s, then write %s again with the %d entries that read, covering %s at revision %d",
		name, to, name, sv.Entries, wal.SegmentName(meta.Covered), meta.Revision), func(fsys vfs.FS) error {
		// copyFile returns once the copy is durable under its name: only
		// then may the snapshot be replaced.
		if err := copyFile(fsys, name, to); err != nil {
			return err
		}
		var serr error
		entries := func(yield func(*record.Entry) bool) {
			_, serr = image.SalvageAny(fsys, to, func(e *record.Entry) error {
				if !yield(e) {
					return errStopSalvage
				}
				return nil
			})
		}
		// Write publishes the new snapshot atomically (tmp, sync, rename,
		// directory sync): a crash leaves the damaged one or the new one.
		if err := snapshot.Write(fsys, dir, meta, entries); err != nil {
			return err
		}
		if serr != nil && !errors.Is(serr, errStopSalvage) {
			return serr
		}
		return nil
	})
	p.LostKeys = append([]snapshot.Lost{}, sv.Lost...)
	p.listLost(name, sv)
	for _, l := range sv.Lost {
		p.Drops = append(p.Drops, fmt.Sprintf("the snapshot's keys %s, if any (unreadable)", keySpan(l.After, l.Before)))
	}
	p.add("sync "+dir, func(fsys vfs.FS) error { return vfs.SyncDir(fsys, dir) })
	return p, true, nil
}

// errStopSalvage ends a salvage whose reader stopped.
var errStopSalvage = errors.New("recovery: salvage stopped")
