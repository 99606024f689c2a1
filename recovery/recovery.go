package recovery

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/layered"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Options configure Recover. The zero value is valid.
type Options struct {
	// WAL configures the writer that Recover returns and the segment it
	// may create.
	WAL wal.Options
	// ReadOnly recovers in memory and writes nothing: no checkpoint, no
	// deletion, no writer. It shows only what is durable: records in the
	// newest segment past the highest offset any of its records claims
	// synced are left out (Result.Unvouched counts them), since they may
	// exist in the page cache alone.
	ReadOnly bool
	// LockShared, for a ReadOnly recovery, takes the directory's lock
	// shared, which no live writer allows, and returns how to let it go.
	// The recovery calls it only when the newest segments hold records
	// past their synced claims (a live writer's last group, or a dead
	// writer's), and, when it gets the lock, vouches for those records
	// itself and applies them: they are shown once an fdatasync of their
	// segment and an fsync of the directory have returned, and the bytes
	// read back the same past the page cache (vfs.ReadDurableAt; where
	// the file system cannot read past it, the fdatasync's success
	// alone). Neither changes a byte of any file. What it cannot vouch
	// for stays out, counted in Result.Unvouched, with the reason in
	// Result.UnvouchedWhy when the lock was had or failed for a reason
	// other than vfs.ErrLocked (a live writer). nil: it never vouches.
	LockShared func() (unlock func(), err error)
	// Logger receives a summary of the recovery; nil discards it.
	Logger *slog.Logger
	// DeferCheckpoint leaves the checkpoint that ends a recovery to the
	// caller, as the kv store does, which writes it in the background
	// while it serves: Recover then still cuts and seals a torn or sealed
	// newest segment and starts the next one, or appends to the newest,
	// but writes no snapshot and deletes no replayed segment. The
	// directory is then as a running store leaves it between two
	// checkpoints, so a later recovery replays the same segments again.
	DeferCheckpoint bool
	// VerifyImage reads and checks every block of the snapshot's image
	// before Recover writes anything, as a recovery that checkpoints does,
	// even with DeferCheckpoint: damage in a block then fails Recover
	// with nothing changed, rather than surface at the first read of the
	// block after Recover rotated or sealed the log.
	VerifyImage bool
	// NoCreate makes Recover refuse a directory that holds no store (it
	// is missing, or empty: see DirEmpty) with an error matching
	// ErrNoStore, instead of creating a store in it. A ReadOnly Recover
	// never creates one.
	NoCreate bool
	// RetainLog is how many bytes of log, in whole segments, stay behind
	// the snapshot for watchers in other processes (kv.WatchDir): the
	// newest segments the snapshot covers are kept while the ones kept
	// add up to less than it, and only the older ones are deleted (see
	// Retained). 0 keeps none: every covered segment is deleted.
	RetainLog int64
}

// Retained splits the segments a durable snapshot covers (ascending) into
// those to delete and those to keep for watchers: walking from the
// newest, a segment is kept while the sizes of the ones kept before it
// add up to less than retain bytes, so at least retain bytes of the log
// before the snapshot stay, where there were as many, in at most one
// segment more. Segment 1 is never kept: a log that starts at segment 1
// is one that no snapshot covers, so a lost snapshot is always seen (the
// log after it then starts past 1). A segment whose size cannot be read
// is kept, and the first such error returned: the next checkpoint or
// recovery decides again.
func Retained(fsys vfs.FS, dir string, covered []wal.SegmentNum, retain int64) (del, keep []wal.SegmentNum, err error) {
	var kept int64
	i := len(covered)
	for i > 0 && kept < retain && covered[i-1] > 1 {
		i--
		fi, serr := fsys.Stat(wal.SegmentPath(dir, covered[i]))
		switch {
		case serr == nil:
			kept += fi.Size()
		case errors.Is(serr, fs.ErrNotExist):
		case err == nil:
			err = serr
		}
	}
	return covered[:i], covered[i:], err
}

// Result is what Recover found and did.
type Result struct {
	// Map is the recovered state.
	Map *layered.Map
	// Leases are the recovered leases and the keys bound to them, each
	// with its deadline as logged (see FORMAT.md, "Leases").
	Leases *record.Leases
	// Writer appends to the newest segment; nil when ReadOnly. The caller
	// owns it and must Close it.
	Writer *wal.Writer
	// Snapshot is the meta record of the snapshot loaded, if HadSnapshot.
	Snapshot    snapshot.Meta
	HadSnapshot bool
	// Replayed counts records replayed from segments; ReplayedBytes their
	// segments' valid bytes; Segments lists the segments replayed.
	Replayed      int
	ReplayedBytes int64
	Segments      []wal.SegmentNum
	// Unvouched counts the records of the newest segment that a read-only
	// open left out because no record claims them durable yet (see
	// Options.ReadOnly).
	Unvouched int
	// UnvouchedWhy says why a read-only recovery that found no live
	// writer left records out: the lock it could not take, the error
	// of its fdatasync, or the offset where the bytes past the cache
	// differ.
	UnvouchedWhy string
	// Vouched counts the records past the segments' synced claims that a
	// read-only recovery made durable itself (Options.LockShared) and
	// shows.
	Vouched int
	// Torn is set when the newest segment ended in crash damage, cut at
	// TornOffset of TornSegment.
	Torn        bool
	TornSegment wal.SegmentNum
	TornOffset  int64
	TornReason  string
	// Checkpointed is set when Recover wrote a snapshot covering the
	// replayed segments and deleted them.
	Checkpointed bool
	// SnapshotBytes is the size of the snapshot file loaded.
	SnapshotBytes int64
	// Deleted lists the segments deleted because a durable snapshot
	// covers them.
	Deleted []wal.SegmentNum
	// Duration is the wall time of the recovery.
	Duration time.Duration
	// Created is set when the directory held no store (DirEmpty) and
	// Recover created one; Marked when it wrote the marker (a new store,
	// or one it adopted).
	Created bool
	Marked  bool
}

// Recover opens the data directory dir: it loads the snapshot, replays the
// segments the snapshot does not cover, cuts a torn tail, and, when it
// replayed or cut anything, checkpoints. The steps are numbered in
// FORMAT.md ("Recovery").
//
// Recover first reads and checks everything and changes nothing until all
// of it is found sound: when it returns an error that IsCorrupt reports,
// no file in dir was changed. Recover is idempotent: a crash at any point
// of it, followed by another Recover, gives the same map as one Recover
// without a crash.
//
// A read-only Recover may run beside a live writer, which rotates
// segments, publishes snapshots and deletes covered segments while it
// reads: an attempt's failure is taken as the directory's only when the
// next attempt fails the same way on an unchanged directory (see
// whileStable), so that a healthy directory is never reported damaged;
// one that changes under every attempt gives an error matching ErrBusy.
func Recover(fsys vfs.FS, dir string, opts Options) (*Result, error) {
	if opts.ReadOnly {
		return whileStable(fsys, dir, func() (*Result, error) { return recoverOnce(fsys, dir, opts) })
	}
	return recoverOnce(fsys, dir, opts)
}

func recoverOnce(fsys vfs.FS, dir string, opts Options) (_ *Result, retErr error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bug := variant.Of(fsys)
	lax := bug == variant.DoubleApply
	res := &Result{Leases: record.NewLeases()}
	// Loading and replaying need point lookups only: the ordered tree of
	// the changes is built once, at the end, with the keys in order.
	m := record.NewMap()
	m.Defer()

	// 0. Is it a store? Nothing that is not one is read as data or
	// changed.
	kind, names, err := identify(fsys, dir)
	if err != nil {
		return nil, err
	}
	if !kind.HoldsStore() && (opts.ReadOnly || opts.NoCreate) {
		return nil, noStore(dir, kind, opts.ReadOnly)
	}
	marked := kind == DirMarked
	res.Created = kind == DirEmpty

	// 1. What is there: the listing identify read.
	if kind == DirMissing {
		// Nothing to list: say so as a listing does.
		if names, err = fsys.List(dir); err != nil {
			return nil, err
		}
	}
	hasTmp := false
	for _, n := range names {
		if n == snapshot.TmpName {
			hasTmp = true
		}
	}
	if hasTmp && bug == variant.TrustTmp && !opts.ReadOnly {
		if err := fsys.Rename(path.Join(dir, snapshot.TmpName), path.Join(dir, snapshot.Name)); err != nil {
			return nil, err
		}
		hasTmp = false
	}
	segs := wal.SegmentsIn(names)

	// 2. The snapshot, if any: an image (version 3 to 5) is opened, its
	// few kilobytes of layout and its leases checked, and serves the
	// entries in place, each block verified on its first read; a snapshot
	// of version 1 or 2 is verified whole as it is loaded into the map.
	snapName := path.Join(dir, snapshot.Name)
	first := true
	base, err := image.OpenAny(fsys, snapName,
		func(meta snapshot.Meta) error { res.Snapshot = meta; return nil },
		func(le *record.Lease) error { return res.Leases.Load(le) },
		func(e *record.Entry) error {
			if first { // the first entry of a snapshot loaded whole
				first = false
				// Size the index for the entries, but never past what
				// the file can hold: a damaged count must not allocate.
				if fi, err := fsys.Stat(snapName); err == nil {
					m.Reserve(int(min(res.Snapshot.Count, uint64(fi.Size()/snapshot.MinEntrySize))))
				}
			}
			m.Load(e)
			return nil
		})
	switch {
	case err == nil:
		res.HadSnapshot = true
		m.SetRevision(res.Snapshot.Revision)
		if base != nil {
			res.SnapshotBytes = base.Size()
		} else if fi, err := fsys.Stat(snapName); err == nil {
			res.SnapshotBytes = fi.Size()
		}
	case errors.Is(err, fs.ErrNotExist):
		m = record.NewMap()
		m.Defer()
		res.Leases = record.NewLeases()
	default:
		return nil, err
	}
	res.Map = layered.New(m, base)
	// From here on a failure closes the image.
	defer func() {
		if retErr != nil {
			res.Map.Close()
		}
	}()
	lm := res.Map
	covered := res.Snapshot.Covered

	// 3. Split the segments into covered ones, to delete, and the rest, to
	// replay; the rest must be numbered covered+1, covered+2, ... .
	var stale, live []wal.SegmentNum
	for _, s := range segs {
		if s <= covered {
			stale = append(stale, s)
		} else {
			live = append(live, s)
		}
	}
	if !lax {
		if err := checkLive(fsys, dir, live, covered, res.HadSnapshot); err != nil {
			return nil, err
		}
		if res.HadSnapshot && len(live) == 0 {
			return nil, &wal.CorruptError{Err: wal.ErrCorrupt, File: wal.SegmentPath(dir, covered+1), Offset: -1,
				Reason: fmt.Sprintf("segment missing: the snapshot covers %s, so %s must exist",
					wal.SegmentName(covered), wal.SegmentName(covered+1))}
		}
		if err := firstSegmentMissing(dir, marked, res.HadSnapshot, live); err != nil {
			return nil, err
		}
	}

	// 4. Replay the live segments in order, exactly once. Only the newest
	// may end in a torn tail, and the one before it when a rotation was
	// cut short (it is not sealed and the newest holds no record yet:
	// FORMAT.md, "Rotation"); logEnd checks which once both are read.
	rd := &wal.Reader{FS: fsys, Dir: dir, MaxRecordSize: opts.WAL.MaxRecordSize}
	// newestFile is the newest segment, open for reading and writing,
	// until step 7 hands it to the writer; any other path closes it.
	var newestFile vfs.File
	var newestSeg wal.SegmentNum
	defer func() {
		if newestFile != nil {
			newestFile.Close()
		}
	}()
	infos := make([]wal.SegmentInfo, 0, len(live))
	// A read-only recovery's shared lock (Options.LockShared), taken when
	// first needed, and held until it returns.
	dirSynced := false // its fsync of the directory returned
	locked, lockErr := false, error(nil)
	rp := &replayer{m: lm, leases: res.Leases, lax: lax, rev: lm.Revision()}
	for i, s := range live {
		newest := i == len(live)-1
		tail := i >= len(live)-2
		file := wal.SegmentPath(dir, s)
		// A read-only open shows only what is durable: in the newest
		// segment, and in the one before it if it is not sealed, the
		// records that end where a later record (a mark, if nothing
		// else) claims the segment synced. The others may be in the page
		// cache alone: a live writer's group whose fdatasync has not
		// returned, a crashed process's last writes, or pages a failed
		// fdatasync left behind, which a power loss takes back.
		limit := int64(-1)
		claimed := int64(-1) // what the segment's writer vouched for
		if tail && opts.ReadOnly {
			info, err := rd.Scan(s, true, nil)
			if err != nil {
				return nil, err
			}
			if newest || !info.Sealed {
				limit, claimed = info.Synced, info.Synced
				if info.DataEnd > info.Synced && opts.LockShared != nil {
					if !locked && lockErr == nil {
						var unlock func()
						if unlock, lockErr = opts.LockShared(); lockErr == nil {
							locked = true
							defer unlock()
						} else if !errors.Is(lockErr, vfs.ErrLocked) && res.UnvouchedWhy == "" {
							res.UnvouchedWhy = fmt.Sprintf("LOCK could not be taken to tell whether a writer is live: %v", lockErr)
						}
					}
					if locked {
						limit = vouch(fsys, dir, file, info.Synced, info.DataEnd, &dirSynced, res)
					}
				}
			}
		}
		apply := func(r wal.Record) error {
			if limit >= 0 && r.End() > limit {
				res.Unvouched++
				return nil
			}
			if claimed >= 0 && r.End() > claimed {
				res.Vouched++
			}
			return rp.add(file, r.Offset, r.Payload)
		}
		var info wal.SegmentInfo
		var err error
		if newest && !opts.ReadOnly {
			// Opened for the writer that step 7 makes when nothing is
			// to be sealed: it appends to this segment.
			info, newestFile, err = rd.ScanToAppend(s, apply)
			newestSeg = s
		} else {
			info, err = rd.Scan(s, tail, apply)
		}
		// The records waiting come before whatever stopped the scan: a
		// failure among them is the first damage in the log.
		if derr := rp.drain(); derr != nil {
			err = derr
		}
		res.Replayed += rp.applied
		rp.applied = 0
		if err != nil && newest && len(infos) > 0 && !infos[len(infos)-1].Sealed && (IsCorrupt(err) || errors.Is(err, wal.ErrVersion)) {
			// Damage in the newest segment while the one before it is not
			// sealed: the log breaks first at the end of that one.
			err = unsealedBefore(dir, infos[len(infos)-1], s)
		}
		if err != nil {
			return nil, err
		}
		if info.Records > 0 {
			res.Segments = append(res.Segments, s)
			res.ReplayedBytes += info.End
		}
		infos = append(infos, info)
	}
	lm.BuildAsync() // the caller may use the map while its tree is built
	last, next, err := logEnd(dir, infos, marked && !lax)
	if err != nil {
		return nil, err
	}
	if last.Torn {
		res.Torn, res.TornSegment, res.TornOffset, res.TornReason = true, last.Segment, last.End, last.TornReason
	}

	if opts.ReadOnly {
		res.Duration = time.Since(start)
		logSummary(log, dir, res)
		return res, nil
	}

	// A recovery that may checkpoint reads the whole image to write the
	// next one: it verifies it first, so that damage in it stops the
	// recovery before anything is written, as damage in a snapshot of
	// version 1 or 2 does. A store's recovery defers its checkpoint and
	// leaves each block to be verified on its first read.
	if base != nil && (!opts.DeferCheckpoint || opts.VerifyImage) {
		if err := base.Verify(); err != nil {
			return nil, err
		}
	}

	// Everything is read and sound: from here on Recover writes.

	// The seal of the segment before a newest one that holds no record
	// may be in the page cache alone (a writer, or a recovery, that
	// crashed between writing it and syncing it, or whose sync of it
	// failed): it must be durable before anything is written after it,
	// since a segment followed by records must be sealed. SealTail writes
	// it again before it syncs: after a failed fdatasync the kernel
	// treats its pages as clean, and a sync alone would not write them.
	if n := len(infos); next == nil && n >= 2 && infos[n-2].Sealed && holdsNoRecord(infos[n-1]) {
		if err := wal.SealTail(fsys, dir, infos[n-2], nil); err != nil {
			return nil, err
		}
	}

	// 5. Delete the segments the snapshot covers, once the snapshot is
	// durable. This process may not have written it: a crash may have
	// come between its rename and the directory sync.
	del, _, err := Retained(fsys, dir, stale, opts.RetainLog)
	if err != nil {
		return nil, err
	}
	if len(del) > 0 {
		if err := syncFile(fsys, path.Join(dir, snapshot.Name)); err != nil {
			return nil, err
		}
		if err := vfs.SyncDir(fsys, dir); err != nil {
			return nil, err
		}
		for _, s := range del {
			// Safe: the snapshot that covers s is durable.
			if err := fsys.Remove(wal.SegmentPath(dir, s)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			res.Deleted = append(res.Deleted, s)
		}
	}

	// 6. Checkpoint when anything was replayed or cut, or when the log's
	// last segment is sealed (a store made before the marker) or was
	// being sealed (a rotation cut short) and cannot take appends. A
	// deferred checkpoint still needs the tail cut and sealed, and the
	// next segment.
	deferred := opts.DeferCheckpoint
	seal := last.Torn || last.Sealed || next != nil
	switch {
	case (res.Replayed > 0 || seal) && !deferred:
		if err := checkpoint(fsys, dir, opts, res, last, next); err != nil {
			return nil, err
		}
	case seal:
		w, err := sealAndNext(fsys, dir, opts, last, next)
		if err != nil {
			return nil, err
		}
		res.Writer = w
	default:
		// 7. Nothing to replay: append to the newest segment, or start
		// the first one.
		var w *wal.Writer
		if len(live) == 0 {
			w, err = createSegment(fsys, dir, covered+1, opts.WAL)
		} else {
			f := newestFile
			if last.Segment != newestSeg {
				f = nil // closed by the deferred close
			} else {
				newestFile = nil
			}
			w, err = appendTo(fsys, dir, last, opts.WAL, f)
		}
		if err != nil {
			return nil, err
		}
		res.Writer = w
	}

	// 8. A stale snapshot.tmp is never trusted. Its removal is made
	// durable: the store's next checkpoint creates a new snapshot.tmp and
	// renames it, and a crash that kept that rename but lost the removal
	// and the create would move the stale file into place (vfs.Publish
	// syncs the removals it makes itself for the same reason).
	if hasTmp {
		err := fsys.Remove(path.Join(dir, snapshot.TmpName))
		if err == nil {
			err = vfs.SyncDir(fsys, dir)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			res.Writer.Close()
			return nil, err
		}
	}
	// 9. The marker, last: a directory that holds it holds a first
	// segment or a snapshot, durably, so that losing every one of them
	// is found (a store being created, or one made before the marker
	// existed, gets it here).
	if !marked {
		if err := writeMarker(fsys, dir); err != nil {
			res.Writer.Close()
			return nil, err
		}
		res.Marked = true
	}
	res.Duration = time.Since(start)
	logSummary(log, dir, res)
	return res, nil
}

// appendTo opens a writer appending to last, the newest segment: through
// f, the file its scan opened for reading and writing (appendTo takes
// it), or, when f is nil, by opening it.
func appendTo(fsys vfs.FS, dir string, last wal.SegmentInfo, opts wal.Options, f vfs.File) (*wal.Writer, error) {
	if f == nil {
		return wal.OpenAppend(fsys, dir, last, opts)
	}
	return wal.OpenAppendFile(fsys, dir, last, opts, f)
}

// sealAndNext seals last, the segment that ends the log, and starts the
// next one, or opens next, the next segment a rotation cut short left
// holding no record. The next segment exists durably before the seal is
// written (FORMAT.md, "Rotation"), so that a sealed segment is never the
// newest.
func sealAndNext(fsys vfs.FS, dir string, opts Options, last wal.SegmentInfo, next *wal.SegmentInfo) (*wal.Writer, error) {
	var w *wal.Writer
	// 6b. The next segment, durable: created (Create syncs it and the
	// directory), or, when it exists, its name made durable (OpenAppend
	// syncs the directory for a segment that holds no record, and writes
	// its header if it is missing). It exists before the snapshot that
	// says the segments before it are covered: a snapshot covering N
	// implies that segment N+1 exists.
	open := func() error {
		var err error
		if next != nil {
			w, err = wal.OpenAppend(fsys, dir, *next, opts.WAL)
		} else {
			w, err = createSegment(fsys, dir, last.Segment+1, opts.WAL)
		}
		return err
	}
	// 6a. Cut a torn tail and make the records durable before the next
	// segment exists, and seal after: otherwise a later recovery would
	// find the tail in a segment followed by records and call it
	// corruption. A seal found already in place is synced too: it may
	// be only in the page cache of the crashed process that wrote it.
	var err error
	if variant.Of(fsys) != variant.TornAsCorrupt || last.Sealed {
		err = wal.SealTail(fsys, dir, last, open)
	} else {
		err = open()
	}
	if err != nil {
		if w != nil {
			// Not Close, whose mark would be a record in the next
			// segment before the seal of the last is durable: the
			// log a crash then leaves has damage before records.
			w.Abandon()
		}
		return nil, err
	}
	return w, nil
}

// checkpoint seals the log's last segment, starts the next (or opens the
// one a rotation cut short), writes a snapshot covering everything up to
// the last and deletes what it covers.
func checkpoint(fsys vfs.FS, dir string, opts Options, res *Result, last wal.SegmentInfo, next *wal.SegmentInfo) error {
	w, err := sealAndNext(fsys, dir, opts, last, next)
	if err != nil {
		return err
	}
	// 6c and 6d, as a running store's checkpoint does them.
	meta := snapshot.Meta{Covered: last.Segment, Revision: res.Map.Revision(), Count: uint64(res.Map.Len())}
	res.Deleted, err = WriteCheckpointLeases(fsys, dir, meta, res.Leases.All(), res.Map.AllOnce(nil, nil), opts.RetainLog)
	if err != nil {
		w.Close()
		return err
	}
	res.Writer = w
	res.Checkpointed = true
	return nil
}

// WriteCheckpoint is FORMAT.md's checkpoint once the log has rotated (the
// segment meta.Covered is sealed and its successor exists durably): it
// publishes a snapshot of entries with meta as its first record, an
// image (format version 5, image.Write), durable when it returns
// (snapshot.tmp, fdatasync, rename, directory fsync), and only then
// deletes the segments it covers but those Retained keeps for retain
// bytes, and returns them. A segment already gone (a checkpoint before
// removed it) is not an error; a failure to delete one is returned after the others
// were tried: the snapshot covers them all, so each may go on its own,
// and what is left is deleted by the next recovery (step 5). Recovery's
// checkpoint and the store's background checkpoint both call it.
func WriteCheckpoint(fsys vfs.FS, dir string, meta snapshot.Meta, entries iter.Seq2[*record.Entry, error], retain int64) ([]wal.SegmentNum, error) {
	return WriteCheckpointLeases(fsys, dir, meta, nil, entries, retain)
}

// WriteCheckpointLeases is WriteCheckpoint of a snapshot that holds the
// live leases too: in ascending id order, each
// with the keys bound to it, every one of them among entries.
func WriteCheckpointLeases(fsys vfs.FS, dir string, meta snapshot.Meta, leases []record.Lease, entries iter.Seq2[*record.Entry, error], retain int64) ([]wal.SegmentNum, error) {
	bug := variant.Of(fsys)
	covered := meta.Covered
	if bug == variant.DoubleApply {
		meta.Covered = 0 // the article's defect: a snapshot that does not say what it covers
	}
	var deleted []wal.SegmentNum
	deleteCovered := func() error {
		segs, err := wal.ListSegments(fsys, dir)
		if err != nil {
			return err
		}
		n := 0
		for n < len(segs) && segs[n] <= covered {
			n++
		}
		del, _, first1 := Retained(fsys, dir, segs[:n], retain)
		for _, s := range del {
			// Safe: the snapshot that covers s is durable (or, under the
			// unlink-early variant, is about to be written: the defect).
			err := fsys.Remove(wal.SegmentPath(dir, s))
			switch {
			case err == nil:
				deleted = append(deleted, s)
			case errors.Is(err, fs.ErrNotExist):
			case first1 == nil:
				first1 = err
			}
		}
		return first1
	}
	if bug == variant.UnlinkEarly {
		if err := deleteCovered(); err != nil {
			return deleted, err
		}
	}
	// The snapshot is an image (version 5), published as every snapshot
	// is (tmp, fdatasync, rename, directory fsync: durable when Write
	// returns), its meta frame first, naming what it covers. Its hash
	// seed is drawn at random, so that no one can choose keys that
	// collide in it.
	if err := image.WriteAll(fsys, dir, snapshot.Name, meta, leases, entries, image.Options{}); err != nil {
		return deleted, err
	}
	if bug == variant.UnlinkEarly {
		return deleted, nil
	}
	return deleted, deleteCovered()
}

func syncFile(fsys vfs.FS, name string) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func logSummary(log *slog.Logger, dir string, res *Result) {
	// Its attributes are a dozen allocations, made for nothing when the
	// logger drops the line (a store's default logger drops them all).
	if !log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	attrs := []any{
		"dir", dir, "revision", uint64(res.Map.Revision()), "keys", res.Map.Len(),
		"snapshot", res.HadSnapshot, "covered", res.Snapshot.Covered.String(),
		"replayed", res.Replayed, "segments", len(res.Segments),
		"checkpointed", res.Checkpointed, "deleted", len(res.Deleted), "duration", res.Duration,
	}
	if res.Torn {
		attrs = append(attrs, "torn", fmt.Sprintf("%s at %d: %s", wal.SegmentName(res.TornSegment), res.TornOffset, res.TornReason))
	}
	log.Info("recovered", attrs...)
}

// replayer applies the records of the log to a map in order, a few
// records behind the one read: the index slots of a record's keys are
// prefetched when it is read (see record.Map.Prefetch), and are in the
// cache when it is applied, so that a replay of small records waits for
// several cache misses at once rather than for each in turn. A record is
// checked (decoded, its revision the next) when read, and applied later.
type replayer struct {
	m       *layered.Map
	leases  *record.Leases
	lax     bool            // the double-apply variant: revisions are not checked
	rev     record.Revision // of the last record read
	ring    [replayAhead]pendingRecord
	head, n int
	direct  record.Record // a big record, applied as soon as read
	applied int           // records applied
	failed  error         // the first record that could not be applied
}

// replayAhead is how many small records wait to be applied.
const replayAhead = 8

// smallRecord is the largest record that waits in the ring, copied: a
// bigger one holds many operations, whose slots Apply prefetches itself.
const smallRecord = 4 << 10

// pendingRecord is a record read and not yet applied, with its own copy
// of its bytes (the reader's buffer moves on).
type pendingRecord struct {
	payload []byte
	rec     record.Record
	file    string
	off     int64
}

// add reads the record at off in file, and applies the oldest waiting if
// the ring is full.
func (r *replayer) add(file string, off int64, payload []byte) error {
	if len(payload) > smallRecord {
		if err := r.drain(); err != nil {
			return err
		}
		if err := r.decode(file, off, payload, &r.direct); err != nil {
			return err
		}
		return r.apply(file, off, &r.direct)
	}
	p := &r.ring[(r.head+r.n)%replayAhead]
	p.payload = append(p.payload[:0], payload...)
	p.file, p.off = file, off
	if err := r.decode(file, off, p.payload, &p.rec); err != nil {
		// The records before it go first: a failure among them is the
		// first damage in the log, the one to report.
		if derr := r.drain(); derr != nil {
			return derr
		}
		return err
	}
	for i := range p.rec.Ops {
		r.m.Prefetch(p.rec.Ops[i].Key)
	}
	if r.n++; r.n == replayAhead {
		return r.applyOldest()
	}
	return nil
}

// decode decodes payload into rec and checks that its revision is the next.
func (r *replayer) decode(file string, off int64, payload []byte, rec *record.Record) error {
	if err := record.DecodeInto(payload, rec); err != nil {
		return &wal.CorruptError{Err: record.ErrCorrupt, File: file, Offset: off, Reason: err.Error()}
	}
	if r.lax {
		rec.Revision = r.rev + 1
	} else if err := nextRevision(file, off, rec, r.rev); err != nil {
		return err
	}
	r.rev = rec.Revision
	return nil
}

// apply applies rec, read at off in file. After a failure it applies
// nothing more and returns that failure.
func (r *replayer) apply(file string, off int64, rec *record.Record) error {
	if r.failed != nil {
		return r.failed
	}
	// The lease rules first: a record that breaks one is refused before
	// the map takes it.
	err := r.leases.Check(rec)
	if err == nil {
		err = r.m.Apply(rec)
	}
	if err == nil {
		err = r.leases.Apply(rec)
	}
	if err != nil && (errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, vfs.ErrMapFault)) {
		// The record is sound: the image it applies over is not (a block
		// that failed its check, a read the disk failed), and the error
		// names the image's file and offset.
		r.failed = err
		return r.failed
	}
	if err != nil {
		r.failed = &wal.CorruptError{Err: record.ErrCorrupt, File: file, Offset: off,
			Reason: fmt.Sprintf("record %d cannot be applied: %v", rec.Revision, err)}
		return r.failed
	}
	r.applied++
	return nil
}

func (r *replayer) applyOldest() error {
	p := &r.ring[r.head]
	r.head = (r.head + 1) % replayAhead
	r.n--
	return r.apply(p.file, p.off, &p.rec)
}

// drain applies every record waiting, and returns the first failure to
// apply one, if any.
func (r *replayer) drain() error {
	if r.failed != nil {
		return r.failed
	}
	for r.n > 0 {
		if err := r.applyOldest(); err != nil {
			return err
		}
	}
	return nil
}

// shape is what a writer's checkpoint changes in a directory: the names
// in it and the snapshot's first record.
type shape struct {
	names string
	meta  snapshot.Meta
}

func shapeOf(fsys vfs.FS, dir string) shape {
	names, _ := fsys.List(dir)
	meta, _ := image.ReadAnyMeta(fsys, path.Join(dir, snapshot.Name))
	return shape{names: strings.Join(names, "/"), meta: meta}
}

// stableAttempts bounds the attempts of whileStable; stablePause is the
// pause after the first failed one, doubled after each up to
// stableMaxPause, so that a writer in the middle of a write or a
// checkpoint gets time to finish it, and the pauses add up to about two
// seconds before a reader gives up.
const (
	stableAttempts = 40
	stablePause    = time.Millisecond
	stableMaxPause = 50 * time.Millisecond
)

// whileStable runs read, which reads dir without the lock, until it
// succeeds, or until it fails twice in a row with the same error on a
// directory whose shape did not change meanwhile: that error is the
// directory's. Any other failure may be a view of a live writer's moves,
// and read runs again:
//
//   - the shape changed: the writer rotated, checkpointed or deleted what
//     read was about to open (a segment read as sealed while the listing
//     held no next one, a snapshot that covers what was listed);
//   - the shape did not change, and yet one failure is not proof: appends
//     change no name, and a reader that saw the newest segment while its
//     writer appended to it, or saw the segment before it unsealed and
//     then the newest already holding records, or left out a segment's
//     last records as not yet synced and then read the next ones, saw a
//     log no single moment held. A writer never makes the same such view
//     twice, as what it appended stays: the next attempt reads it whole.
//
// Damage reads the same every time, so a damaged directory costs one
// attempt more. After stableAttempts attempts it gives up with a
// *BusyError, which is no judgment of the directory.
func whileStable[T any](fsys vfs.FS, dir string, read func() (T, error)) (T, error) {
	start := time.Now()
	pause := stablePause
	var v T
	var err error
	var prev error // the failure of the attempt before, on a shape that held
	var prevShape shape
	for attempt := 1; ; attempt++ {
		before := shapeOf(fsys, dir)
		if v, err = read(); err == nil {
			return v, nil
		}
		held := shapeOf(fsys, dir) == before
		if held && prev != nil && prevShape == before && err.Error() == prev.Error() {
			return v, err
		}
		prev, prevShape = nil, shape{}
		if held {
			prev, prevShape = err, before
		}
		if attempt == stableAttempts {
			var zero T
			return zero, &BusyError{Dir: dir, Attempts: attempt, Elapsed: time.Since(start), Last: err}
		}
		time.Sleep(pause)
		pause = min(2*pause, stableMaxPause)
	}
}

// nextRevision checks that rec, read at off in file, follows a record of
// revision prev: one more, or, for a skip a repair wrote, more.
func nextRevision(file string, off int64, rec *record.Record, prev record.Revision) error {
	want := prev + 1
	if rec.Revision == want || rec.Skip && rec.Revision > want {
		return nil
	}
	return &wal.CorruptError{Err: wal.ErrCorrupt, File: file, Offset: off,
		Reason: fmt.Sprintf("record has revision %d, expected %d", rec.Revision, want)}
}
