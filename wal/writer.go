package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"

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

	// salt, when set, chooses the salt of every segment created (tests
	// that compare bytes with a golden file need the same salt each run).
	salt func() uint64
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
// Every record the Writer frames carries the offset up to which it knows
// the segment durable (its synced offset). Mark writes a record that
// carries only that, so that a reader can tell how much of the segment is
// durable without syncing anything.
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
	key    *segKey
	f      vfs.File
	off    int64 // where the next record goes
	synced int64 // bytes of seg known durable
	// dataEnd is the end of the last record that must be durable (every
	// record but marks): Sync has nothing to do while synced covers it.
	dataEnd int64
	claimed int64 // the highest synced offset a record in seg claims
	alloc   int64 // file size reserved by preallocation
	err     error // sticky failure
	closed  bool
	records bool // the current segment holds a data record
	buf     []byte
}

// Create creates segment seg, which must not exist, writes its header
// record, syncs the file and the directory, and returns a Writer appending
// to it.
func Create(fsys vfs.FS, dir string, seg SegmentNum, opts Options) (*Writer, error) {
	w := &Writer{fsys: fsys, dir: dir, opts: opts}
	if err := w.create(seg); err != nil {
		if w.f != nil {
			w.f.Close()
		}
		return nil, err
	}
	return w, nil
}

// OpenAppend returns a Writer appending to the existing segment info
// describes, at info.End, as Scan reported it for the newest segment; the
// bytes past End must be zeros (Scan found no torn tail).
//
// Records past info.Synced may be only in the page cache: left by a
// process that crashed, or pages a failed fdatasync left behind, which
// the kernel treats as clean and will never write. OpenAppend writes
// those bytes again, unchanged, and syncs them: the caller may show them
// to readers, so they must be durable before it does (nothing to write
// or sync after a clean close, whose mark claims every record synced).
// It syncs the directory only when the segment holds no record but its
// header: any later record was written after the directory sync that
// made the segment's name durable.
func OpenAppend(fsys vfs.FS, dir string, info SegmentInfo, opts Options) (*Writer, error) {
	f, err := fsys.OpenReadWrite(SegmentPath(dir, info.Segment))
	if err != nil {
		return nil, err
	}
	if info.Size, err = vfs.Size(f); err != nil {
		f.Close()
		return nil, err
	}
	return OpenAppendFile(fsys, dir, info, opts, f)
}

// OpenAppendFile is OpenAppend of f, the segment info describes, open for
// reading and writing since the scan that returned info and f
// (Reader.ScanToAppend), whose size was info.Size then; the header that
// scan checked is not read again. It takes f: on an error f is closed.
func OpenAppendFile(fsys vfs.FS, dir string, info SegmentInfo, opts Options, f vfs.File) (*Writer, error) {
	var key *segKey
	if sf, ok := f.(*scannedFile); ok {
		f = sf.File
		if sf.seg == info.Segment {
			key = sf.key
		}
	}
	w := &Writer{fsys: fsys, dir: dir, opts: opts, seg: info.Segment, f: f, off: info.End, records: info.Records > 0, alloc: info.Size, key: key}
	if err := w.openAppend(info); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

func (w *Writer) openAppend(info SegmentInfo) error {
	if info.End == 0 {
		// Created, but its header never reached the disk: write one and
		// make it durable, as Create does, before any record follows.
		w.off = 0
		if err := w.writeHeader(); err != nil {
			return err
		}
		if err := w.f.Sync(); err != nil {
			return err
		}
		w.synced = w.off
		return vfs.SyncDir(w.fsys, w.dir)
	}
	if w.key == nil { // not handed over by ScanToAppend
		k, err := readKey(w.f, SegmentPath(w.dir, w.seg), w.seg)
		if err != nil {
			return err
		}
		w.key = k
	}
	w.synced, w.claimed, w.dataEnd = info.Synced, info.Synced, info.Synced
	if info.DataEnd > info.Synced {
		if err := rewrite(w.f, info.Synced, info.DataEnd); err != nil {
			return err
		}
		// The caller serves what it read (recovery shows these records
		// to readers, whose revisions are fencing tokens): they must be
		// durable before it does. Nothing to do after a clean close,
		// whose mark claims every record synced.
		if err := w.f.Sync(); err != nil {
			return err
		}
		w.synced, w.dataEnd = info.End, info.End
	}
	if info.End <= firstRecord {
		// Only the header: the process that created the segment may have
		// died before its directory sync.
		return vfs.SyncDir(w.fsys, w.dir)
	}
	return nil
}

// readKey reads and checks the header record of segment seg in f.
func readKey(f vfs.File, name string, seg SegmentNum) (*segKey, error) {
	b := make([]byte, firstRecord)
	if n, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && n == len(b)) {
		return nil, fmt.Errorf("wal: read %s: %w", name, err)
	}
	k, reason, err := parseSegmentHeader(name, seg, b)
	if err == nil && reason != "" {
		err = corruptf(name, 0, "%s", reason)
	}
	return k, err
}

// rewrite writes the bytes [from, to) of f again, unchanged, so that they
// are dirty in the page cache and the next sync writes them to the disk.
// After a failed fdatasync the kernel marks the pages it could not write
// clean; a later fdatasync returns without writing them, and they are
// gone at the next power loss, though every read in this boot returns
// them.
func rewrite(f vfs.File, from, to int64) error {
	buf := make([]byte, min(to-from, 1<<20))
	for off := from; off < to; {
		n := min(to-off, int64(len(buf)))
		if k, err := f.ReadAt(buf[:n], off); err != nil && !(err == io.EOF && int64(k) == n) {
			return err
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
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
	w.seg, w.f, w.off, w.synced, w.claimed, w.alloc, w.records = seg, f, 0, 0, 0, 0, false
	if err := w.writeHeader(); err != nil {
		return err
	}
	if err := w.reserve(w.off); err != nil {
		return err
	}
	// The header must be durable before any record follows it: readers
	// check every record against the salt it holds, and a crash must never
	// leave later records behind a lost header.
	if err := w.f.Sync(); err != nil {
		return err
	}
	// Nothing claims the header durable yet: the first record will, or
	// the mark of an idle writer or of Close. A segment left holding its
	// header alone (a Close right after a checkpoint or a rotation) gets
	// that mark, so that the next open finds a record past the header and
	// knows the directory sync above happened; without it, that open
	// synced the directory again (FORMAT.md, "Recovery", step 7), about
	// a millisecond here.
	w.synced, w.dataEnd, w.claimed = w.off, w.off, 0
	// The new name must be durable before any record in the segment is
	// acknowledged; syncing the directory now does it once per segment.
	return vfs.SyncDir(w.fsys, w.dir)
}

// Salter is implemented by a file system that chooses the salts of the
// segments created in it: a simulation does, so that its runs are
// repeatable. Every other file system leaves salts to the Writer, which
// draws them at random; so does one whose NewSalt returns 0.
type Salter interface {
	NewSalt() uint64
}

// writeHeader writes a header record with a new salt at w.off (0).
func (w *Writer) writeHeader() error {
	salt := newSalt()
	if s, ok := w.fsys.(Salter); ok {
		if v := s.NewSalt(); v != 0 {
			salt = v
		}
	}
	if w.opts.salt != nil {
		salt = w.opts.salt()
	}
	w.key = keyFor(salt)
	return w.writeLocked(TypeHeader, segmentHeaderPayload(w.seg, salt))
}

// reserve preallocates space so that the file covers end, in steps of
// Options.Preallocate (smaller at first, see below). The space reserved past end is a look-ahead, and
// never more than half the file system's free space (when it can tell):
// a step of a megabyte is half of a 2 MiB disk. When even that does not
// fit (ENOSPC), it reserves only up to end: the disk is full once the
// records themselves do not fit.
func (w *Writer) reserve(end int64) error {
	step := w.opts.Preallocate
	if step <= 0 || end <= w.alloc {
		return nil
	}
	// A segment's first steps are smaller, each the size of what it
	// reserved before, from firstReserve up to Options.Preallocate: every
	// open scans the newest segment to its end (rule 1), and a checkpoint
	// starts one, so a reopen after it, or a short-lived process, reads
	// 16 KiB where it would read a megabyte (a scan of 64 KiB was a
	// tenth of a reopen's time in a new process); a busy writer reaches
	// full steps within a few.
	step = min(step, max(firstReserve, w.alloc))
	need := end - w.alloc
	n := (need + step - 1) / step * step
	if free, ok := vfs.FreeSpace(w.fsys, w.dir); ok && n > need {
		n = max(need, min(n, free/2/SectorSize*SectorSize))
	}
	err := w.f.Preallocate(w.alloc, n)
	if n > need && errors.Is(err, syscall.ENOSPC) {
		n = need
		err = w.f.Preallocate(w.alloc, n)
	}
	if err != nil {
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

// firstReserve is the first step of a segment's reservation (reserve).
const firstReserve = 16 << 10

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
	w.buf = appendRecord(w.buf[:0], w.key, t, w.synced, payload)
	if err := w.reserve(w.off + int64(len(w.buf))); err != nil {
		return err
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return err
	}
	w.off += int64(len(w.buf))
	w.claimed = max(w.claimed, w.synced)
	if t != TypeMark {
		w.dataEnd = w.off
	}
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
		w.buf = appendRecord(w.buf, w.key, TypeData, w.synced, p)
	}
	pos := Position{Segment: w.seg, Offset: w.off}
	if err := w.reserve(w.off + int64(len(w.buf))); err != nil {
		return Position{}, w.fail(err)
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return Position{}, w.fail(err)
	}
	w.off += int64(len(w.buf))
	w.dataEnd = w.off
	w.claimed = max(w.claimed, w.synced)
	w.records = true
	if cap(w.buf) > 1<<20 {
		w.buf = nil // do not pin a large batch's buffer
	}
	return pos, nil
}

// Sync makes every record appended so far durable (fdatasync). It does
// nothing when only marks were written since the last sync.
func (w *Writer) Sync() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return err
	}
	f, target := w.f, w.off
	if w.dataEnd <= w.synced {
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()
	// The records' durability is the acknowledgement: nothing may be
	// acknowledged before this returns.
	err := f.Sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return w.fail(err)
	}
	w.synced = max(w.synced, target)
	return nil
}

// Mark writes a mark record, which says how far the segment is durable,
// unless a record already says as much. It does not sync it: a reader
// that finds it may trust the records before the offset it names; one
// that does not finds them all the same, just not yet vouched for.
func (w *Writer) Mark() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if w.synced <= w.claimed {
		return nil
	}
	if err := w.writeLocked(TypeMark, nil); err != nil {
		return w.fail(err)
	}
	return nil
}

// Rotate seals the current segment and starts the next one, in the
// order that keeps a sealed segment from ever being the newest (FORMAT.md,
// "Rotation"): it syncs the current segment's records, creates the next
// segment durably (header synced, directory synced), and only then
// appends the seal record to the current one and syncs it. It returns the
// number of the sealed segment: every record appended before Rotate is in
// it or an earlier one.
//
// A crash before the seal is durable leaves the current segment unsealed
// and the next one holding no record, which recovery reads as a rotation
// cut short; a newest segment that is sealed is therefore not a crash
// state but a missing segment. When the next segment cannot be created
// (a full disk), what was created of it is removed and the writer fails.
func (w *Writer) Rotate() (SegmentNum, error) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return 0, err
	}
	sealed := w.seg
	// The records must be durable before the next segment exists: a
	// reader that finds the next segment takes every record before the
	// seal as durable, and a crash that loses the seal must leave them
	// whole.
	if w.dataEnd > w.synced {
		if err := w.f.Sync(); err != nil {
			return 0, w.fail(err)
		}
		w.synced = w.off
	}
	f, key, off, synced := w.f, w.key, w.off, w.synced
	dataEnd, claimed, alloc, records := w.dataEnd, w.claimed, w.alloc, w.records
	restore := func() {
		w.seg, w.f, w.key, w.off, w.synced = sealed, f, key, off, synced
		w.dataEnd, w.claimed, w.alloc, w.records = dataEnd, claimed, alloc, records
	}
	if err := w.create(sealed + 1); err != nil {
		if w.f != f {
			w.f.Close()
		}
		if !errors.Is(err, fs.ErrExist) {
			// Nothing refers to it yet: the segment before it is not
			// sealed. Its removal need not be durable (an empty next
			// segment is a rotation cut short, which recovery accepts).
			w.fsys.Remove(SegmentPath(w.dir, sealed+1))
		}
		restore()
		return 0, w.fail(err)
	}
	// The next segment is durable: now the seal, which makes this one a
	// sealed segment for good.
	rec := appendRecord(nil, key, TypeSeal, synced, nil)
	_, err := f.WriteAt(rec, off)
	if err == nil {
		// Synced before the next segment takes a record: a sealed segment
		// is one whose successor may hold records.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, w.fail(err)
	}
	return sealed, nil
}

// HoldsRecords reports whether the segment being appended to holds a data
// record: a checkpoint need not rotate a segment that holds none (the one
// before it is sealed, and holds every record).
func (w *Writer) HoldsRecords() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.records
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

// Close syncs the current segment, marks how far it is durable (see
// Mark), and closes it. It does not seal it: the newest segment stays
// open for the next writer. A second Close returns nil.
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
	if err := w.Mark(); err != nil && !errors.Is(err, ErrClosed) {
		w.mu.Lock()
		if !w.closed {
			w.closed = true
			w.f.Close()
		}
		w.mu.Unlock()
		return err
	}
	return w.Abandon() // synced and marked: only the file is left to close
}

// Abandon closes the segment's file and writes nothing, not even the
// mark Close writes: for a segment that must take no record yet, the
// next segment of a seal that did not become durable (see SealTail),
// which a later recovery must find holding no record, as a rotation cut
// short leaves it. The Writer is closed after it.
func (w *Writer) Abandon() error {
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

// SealTail prepares the segment info describes (as Scan reported it for
// the segment that ends the log) for a successor, in the order of Rotate:
// it makes the records past info.Synced durable by writing them again
// (see OpenAppend) and syncing; then it calls next, which must make the
// next segment exist durably (create it, or open one a rotation cut
// short); then it cuts a torn tail off at info.End and syncs, and appends
// a seal record unless the segment is sealed already, and syncs.
// Recovery calls it before it writes anything in the next segment, so
// that a torn tail is never found later in a segment followed by records
// (cockroachdb/cockroach#68319), and a sealed segment is never the newest.
//
// When next fails (a full disk), SealTail returns its error and the
// segment holds the bytes it held (the records written again are the same
// bytes): a failed open leaves the directory as it found it.
func SealTail(fsys vfs.FS, dir string, info SegmentInfo, next func() error) error {
	seg, end := info.Segment, info.End
	name := SegmentPath(dir, seg)
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return err
	}
	w := &Writer{fsys: fsys, dir: dir, seg: seg, f: f, off: end, synced: info.Synced}
	if end > 0 {
		w.key, err = readKey(f, name, seg)
		if err == nil && info.DataEnd > info.Synced {
			// The records (a seal already in place among them) must be
			// durable before the next segment exists (see Rotate).
			err = rewrite(f, info.Synced, info.DataEnd)
			if err == nil {
				err = f.Sync()
			}
		}
	}
	if err == nil && next != nil {
		err = next()
	}
	if err == nil && (info.Torn || info.Size > end) {
		// A torn tail, or zeros the log had reserved, go. The cut of a
		// torn tail must be durable before a record is written over it:
		// a crash could otherwise keep the new record but not the cut,
		// leaving the tail's bytes after a seal (corruption).
		err = f.Truncate(end)
		if err == nil {
			err = f.Sync()
		}
	}
	if err == nil && end == 0 {
		err = w.writeHeader()
	}
	if err == nil && !info.Sealed {
		err = w.writeLocked(TypeSeal, nil)
	}
	if err == nil && (end == 0 || !info.Sealed) {
		// The seal must be durable before the next segment takes a
		// record (see Rotate).
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RepairTail writes payload as a data record at offset off of segment seg,
// over whatever lies there, syncs it, and only then cuts the file right
// after it and syncs again. It is for repairs that end a damaged log with
// a record of their own: since the record is durable before the damage
// after it is cut, a crash never leaves the log clean without it. The
// record claims nothing synced; a mark after it, written and synced once
// the cut is durable, claims it synced, so that a read-only reader (which
// trusts only the records of the newest segment that a later record
// claims synced) sees it too. A crash that loses the mark leaves the log
// as it was before the mark: the record, durable, unvouched.
//
// When off falls inside the segment header (the header is the damage), a
// new header with a new salt goes at offset 0, and the record after it.
func RepairTail(fsys vfs.FS, dir string, seg SegmentNum, off int64, payload []byte) error {
	name := SegmentPath(dir, seg)
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return err
	}
	var rec []byte
	var k *segKey
	if off < firstRecord {
		salt := newSalt()
		k = keyFor(salt)
		rec = appendRecord(nil, k, TypeHeader, 0, segmentHeaderPayload(seg, salt))
		rec = appendRecord(rec, k, TypeData, 0, payload)
		off = 0
	} else if k, err = readKey(f, name, seg); err == nil {
		rec = appendRecord(nil, k, TypeData, 0, payload)
	}
	if err == nil {
		_, err = f.WriteAt(rec, off)
	}
	if err == nil {
		// The record must be durable before the damage after it goes.
		err = f.Sync()
	}
	end := off + int64(len(rec))
	if err == nil {
		err = f.Truncate(end)
	}
	if err == nil {
		// The cut must be durable before the repair reports success.
		err = f.Sync()
	}
	if err == nil {
		err = vouch(f, k, end)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// vouch writes at end, the end of f's records, all durable, a mark that
// claims them synced, and syncs it.
func vouch(f vfs.File, k *segKey, end int64) error {
	if _, err := f.WriteAt(appendRecord(nil, k, TypeMark, end, nil), end); err != nil {
		return err
	}
	return f.Sync()
}

// Vouch makes every record appended so far durable, then writes a mark
// after them that claims them synced, and syncs it too (two syncs), so
// that a reader that trusts only the records of the newest segment that a
// later record claims synced (a read-only open) sees them all. It is for
// a writer whose last record stays the last one, with no writer after it
// to vouch for it (a repair's or a restore's skip); Sync never syncs a
// mark alone.
func (w *Writer) Vouch() error {
	if err := w.Sync(); err != nil {
		return err
	}
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if w.synced <= w.claimed {
		return nil // a record already claims every durable byte
	}
	if err := w.writeLocked(TypeMark, nil); err != nil {
		return w.fail(err)
	}
	if err := w.f.Sync(); err != nil {
		return w.fail(err)
	}
	return nil
}
