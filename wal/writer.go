package wal

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kvstore/kv/vfs"
)

// Options configure a Writer. The zero value is valid.
type Options struct {
	// SegmentSize is the size past which Append seals the segment and
	// starts the next one. 0 means DefaultSegmentSize.
	SegmentSize int64
	// MaxRecordSize bounds a payload; a bigger one is ErrTooLarge. 0 means
	// DefaultMaxRecordSize.
	MaxRecordSize int
	// Preallocate reserves log space ahead of the writer, this many bytes
	// at a time, and writes zeros over it (zeros that readers skip), so
	// that a sync of records appended within it writes neither the file
	// size nor an extent conversion: data alone. 0 disables it.
	Preallocate int64
	// SkipDirSync leaves out the directory sync after a new segment is
	// created (a bug variant: a power loss can take the segment, and the
	// acknowledged records in it, away).
	SkipDirSync bool
	// RetryFailedSync makes Sync retry a failed fdatasync once and go on
	// as if the records were durable when the retry returns nil (a bug
	// variant: after a failed fdatasync the kernel may have dropped the
	// dirty pages, and the retry "succeeds" without them).
	RetryFailedSync bool
}

func (o Options) segmentSize() int64 {
	if o.SegmentSize <= 0 {
		return DefaultSegmentSize
	}
	return o.SegmentSize
}

func (o Options) maxRecordSize() int {
	if o.MaxRecordSize <= 0 {
		return DefaultMaxRecordSize
	}
	return o.MaxRecordSize
}

// Position locates a record.
type Position struct {
	Segment SegmentNum
	Offset  int64
}

// Writer appends records to the newest segment. Append and Sync are
// separate so that many appends can share one sync (group commit). Append
// and Sync may be called from different goroutines; a Sync makes durable
// every record whose Append returned before the Sync began.
//
// Writer is fail-stop: after any failed write or sync, every later call
// returns an error matching ErrFailed.
type Writer struct {
	fsys vfs.FS
	dir  string
	opts Options

	syncMu sync.Mutex // serializes Sync, Rotate and Close; taken before mu
	mu     sync.Mutex // guards the fields below
	seg    SegmentNum
	f      vfs.File
	off    int64 // where the next record goes
	synced int64 // bytes of seg known durable
	alloc  int64 // file size reserved by preallocation
	err    error // sticky failure
	closed bool
	buf    []byte
}

// Create creates segment seg, which must not exist, writes its header
// record and syncs the directory, and returns a Writer appending to it.
func Create(fsys vfs.FS, dir string, seg SegmentNum, opts Options) (*Writer, error) {
	w := &Writer{fsys: fsys, dir: dir, opts: opts}
	if err := w.create(seg); err != nil {
		return nil, err
	}
	return w, nil
}

// OpenAppend returns a Writer appending to the existing segment seg at
// offset end, the SegmentInfo.End that Scan reported for it; the bytes past
// end must be zeros. It syncs the file and its directory first, because
// what recovery read may have been only in the page cache of a crashed
// process, and records written later claim everything before end durable.
func OpenAppend(fsys vfs.FS, dir string, seg SegmentNum, end int64, opts Options) (*Writer, error) {
	name := SegmentPath(dir, seg)
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	w := &Writer{fsys: fsys, dir: dir, opts: opts, seg: seg, f: f, off: end}
	if fi, err := f.Stat(); err == nil {
		w.alloc = fi.Size()
	}
	if end == 0 {
		// Created but its header never reached the disk.
		if err := w.writeLocked(TypeHeader, segmentHeaderPayload(seg)); err != nil {
			f.Close()
			return nil, err
		}
	}
	// Records written from now on say everything before w.off is durable:
	// make that true.
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	// The name may not be durable if the process that created the segment
	// crashed before its directory sync.
	if err := vfs.SyncDir(fsys, dir); err != nil {
		f.Close()
		return nil, err
	}
	w.synced = w.off
	return w, nil
}

// create makes seg the current segment. Called with mu held or before the
// writer is shared.
func (w *Writer) create(seg SegmentNum) error {
	if seg == 0 || seg > maxSegment {
		return fmt.Errorf("wal: segment number %d out of range", uint64(seg))
	}
	f, err := w.fsys.Create(SegmentPath(w.dir, seg))
	if err != nil {
		return err
	}
	w.seg, w.f, w.off, w.synced = seg, f, 0, 0
	if err := w.writeLocked(TypeHeader, segmentHeaderPayload(seg)); err != nil {
		return err
	}
	w.alloc = 0
	if err := w.reserve(w.off); err != nil {
		return err
	}
	if w.opts.SkipDirSync {
		return nil
	}
	// The new name must be durable before any record in the segment is
	// acknowledged; syncing the directory now does it once per segment.
	return vfs.SyncDir(w.fsys, w.dir)
}

// reserve preallocates space so that the file covers end, in steps of
// Options.Preallocate.
func (w *Writer) reserve(end int64) error {
	step := w.opts.Preallocate
	if step <= 0 || end <= w.alloc {
		return nil
	}
	n := (end - w.alloc + step - 1) / step * step
	if err := w.f.Preallocate(w.alloc, n); err != nil {
		return err
	}
	// Write the zeros too, past end (the caller writes up to it). ext4
	// reserves with "unwritten" extents, and a sync of records written
	// into one must journal its conversion: a group commit of a few KiB
	// then costs as much as an append that grows the file. Written zeros
	// make every later sync in the range a pure data flush. The next sync
	// carries the zeros and the conversion, once per step.
	if err := w.writeZeros(max(w.alloc, end), w.alloc+n); err != nil {
		return err
	}
	w.alloc += n
	return nil
}

// zeros is the source of writeZeros; it is never written.
var zeros [1 << 20]byte

// writeZeros writes zeros over [from, to).
func (w *Writer) writeZeros(from, to int64) error {
	for from < to {
		n := min(to-from, int64(len(zeros)))
		if _, err := w.f.WriteAt(zeros[:n], from); err != nil {
			return err
		}
		from += n
	}
	return nil
}

// writeLocked frames one record and writes it at w.off.
func (w *Writer) writeLocked(t RecordType, payload []byte) error {
	w.buf = appendRecord(w.buf[:0], t, w.seg, w.synced, payload)
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return err
	}
	w.off += int64(len(w.buf))
	return nil
}

func (w *Writer) usable() error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, w.err)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

// Append frames the payloads as data records and writes them with one
// write, after sealing the segment and starting the next one if the
// current segment has passed the segment size. It returns the position of
// the first record. The records are durable only after a Sync.
func (w *Writer) Append(payloads ...[]byte) (Position, error) {
	maxRec := w.opts.maxRecordSize()
	for _, p := range payloads {
		if len(p) > maxRec {
			return Position{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(p), maxRec)
		}
	}
	w.mu.Lock()
	full := w.off >= w.opts.segmentSize()
	w.mu.Unlock()
	if full {
		if _, err := w.Rotate(); err != nil {
			return Position{}, err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return Position{}, err
	}
	w.buf = w.buf[:0]
	for _, p := range payloads {
		w.buf = appendRecord(w.buf, TypeData, w.seg, w.synced, p)
	}
	pos := Position{Segment: w.seg, Offset: w.off}
	if err := w.reserve(w.off + int64(len(w.buf))); err != nil {
		return Position{}, w.fail(err)
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return Position{}, w.fail(err)
	}
	w.off += int64(len(w.buf))
	if cap(w.buf) > 1<<20 {
		w.buf = nil // do not pin a large batch's buffer
	}
	return pos, nil
}

// Sync makes every record appended so far durable (fdatasync).
func (w *Writer) Sync() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return err
	}
	f, target := w.f, w.off
	if target == w.synced {
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()
	// The records' durability is the acknowledgement: nothing may be
	// acknowledged before this returns.
	err := f.Sync()
	if err != nil && w.opts.RetryFailedSync {
		err = f.Sync() // the bug variant
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return w.fail(err)
	}
	w.synced = max(w.synced, target)
	return nil
}

// Rotate seals the current segment (a seal record, then a sync that makes
// it and everything before it durable), creates the next segment and syncs
// the directory. It returns the number of the sealed segment: every record
// appended before Rotate is in it or an earlier one.
func (w *Writer) Rotate() (SegmentNum, error) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return 0, err
	}
	sealed := w.seg
	if err := w.writeLocked(TypeSeal, nil); err != nil {
		return 0, w.fail(err)
	}
	// The seal must be durable before the next segment can exist: a
	// segment followed by another is read as sealed, and an unsealed one
	// would then be reported as cut short.
	if err := w.f.Sync(); err != nil {
		return 0, w.fail(err)
	}
	if err := w.f.Close(); err != nil {
		return 0, w.fail(err)
	}
	if err := w.create(sealed + 1); err != nil {
		return 0, w.fail(err)
	}
	return sealed, nil
}

// Segment returns the number of the segment being appended to.
func (w *Writer) Segment() SegmentNum {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seg
}

// Offset returns the size of the current segment's written records.
func (w *Writer) Offset() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.off
}

// Close syncs and closes the current segment. It does not seal it: the
// newest segment stays open for the next writer. A second Close returns
// nil.
func (w *Writer) Close() error {
	if err := w.Sync(); err != nil && !errors.Is(err, ErrClosed) {
		w.mu.Lock()
		if !w.closed {
			w.closed = true
			w.f.Close()
		}
		w.mu.Unlock()
		return err
	}
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.f.Close()
}

// SealTail prepares the newest segment seg, whose valid records end at
// end, for a successor: it cuts whatever follows end (a torn tail or
// zeros), appends a seal record unless sealed is already true, and syncs.
// Recovery calls it before creating the next segment, so that a torn tail
// is never found later in a segment that is no longer the newest and taken
// for corruption (cockroachdb/cockroach#68319).
func SealTail(fsys vfs.FS, dir string, seg SegmentNum, end int64, sealed bool) error {
	f, err := fsys.OpenReadWrite(SegmentPath(dir, seg))
	if err != nil {
		return err
	}
	w := &Writer{fsys: fsys, dir: dir, seg: seg, f: f, off: end}
	err = f.Truncate(end)
	if err == nil && (end == 0 || !sealed) {
		// The cut must be durable before a record is written over the
		// old tail: a crash could otherwise keep the new record but not
		// the cut, leaving the tail's bytes after a seal (corruption).
		err = f.Sync()
	}
	if err == nil && end == 0 {
		err = w.writeLocked(TypeHeader, segmentHeaderPayload(seg))
	}
	if err == nil && !sealed {
		// synced is 0: this process has not synced the bytes before end,
		// so it claims nothing about them.
		err = w.writeLocked(TypeSeal, nil)
	}
	if err == nil {
		// The cut and the seal must be durable before the next segment is
		// created (see Rotate).
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
