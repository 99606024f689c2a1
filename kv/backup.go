package kv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/internal/lockfile"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/layered"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Online backup and restore (FORMAT.md, "Backup"): a backup is the map
// and its leases at one revision in the snapshot's encoding, covered
// segment 0, written from the copy-on-write view that a scan or a
// checkpoint takes, so that writers wait only for the clone. Restore
// turns one into a new data directory whose revisions continue above the
// backup's.

// Hash is a map's content hash (FORMAT.md, "Content hash"): SHA-256 of
// every key's value, create and mod revisions and version, in key order.
// Its String method gives the 64 hexadecimal digits kv DIR stat prints.
type Hash = record.Hash

// Digest identifies a map: its revision, its number of keys and of
// leases, and its content hash. Two maps with the same Hash have the same
// keys with the same values, revisions and versions; the leases are not
// in the hash (CompareBackup compares them).
type Digest struct {
	Revision Revision
	Keys     int64
	Leases   int64
	Hash     Hash
}

// CorruptError is the error that names a damaged file and the byte offset
// of the damage (for a backup, of the frame that holds it): it matches
// its sentinel, such as ErrBackupCorrupt, with errors.Is. It is the same
// type as wal.CorruptError.
type CorruptError = corrupt.Error

// backupBuffer is the size of the buffer Backup writes through.
const backupBuffer = 256 << 10

// view returns a view of the visible map, what a scan reads, and a copy
// of its leases, of the same revision: a copy-on-write clone of the
// changes over a handle of the image (layered.Map.Clone), which the
// caller closes. Clone brings the ordered tree up to date and copies its
// root, and the leases are copied (as a checkpoint copies them), so
// writers wait for that alone.
func (s *Store) view() (*layered.Map, []record.Lease, error) {
	// Clone writes to the tree's copy-on-write bookkeeping, so it needs
	// the write lock.
	s.mu.Lock()
	defer s.mu.Unlock()
	var leases []record.Lease
	if s.leases != nil {
		leases = s.leases.All()
	}
	v, err := s.m.Clone()
	return v, leases, err
}

// entries returns the entries of seq as a sequence that cannot fail: the
// first error stops it and is kept in *err. An encoder given it writes
// through guard(w, err), which refuses every write once *err is set, so
// that a scan cut short by damage never ends in a well-formed file.
func entries(seq iter.Seq2[*record.Entry, error], err *error) iter.Seq[*record.Entry] {
	return func(yield func(*record.Entry) bool) {
		for e, serr := range seq {
			if serr != nil {
				*err = serr
				return
			}
			if !yield(e) {
				return
			}
		}
	}
}

// guarded is a writer that fails once *err is set (see entries).
type guarded struct {
	w   io.Writer
	err *error
}

func (g guarded) Write(p []byte) (int, error) {
	if *g.err != nil {
		return 0, *g.err
	}
	return g.w.Write(p)
}

// Backup writes a backup of the store to w: every key, and every lease
// with its keys and deadline, as of one revision, which it returns, in
// the snapshot encoding (FORMAT.md, "Backup"), checksummed end to end.
// As a checkpoint, it holds the map as committed at that revision: the
// keys of a lease whose deadline has passed but whose expiry is not
// committed yet are in it, with the lease. Writers go on meanwhile: Backup reads a
// copy-on-write view of the map taken when it starts, as Scan does, and
// writers wait only while the view is taken. Until it returns, the view
// holds the store's memory as it was then (see Scan). Under Always, the
// revision is durable: the view holds only what the log holds.
//
// w gets the bytes through a buffer, in order, once; Backup does not sync
// or close it. A write error ends the backup: what w holds then is not a
// backup, and ReadBackup refuses it. Backup works on a store opened
// read-only, and on one that failed (reads go on); after Close it returns
// ErrClosed.
func (s *Store) Backup(w io.Writer) (Revision, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	bw := bufio.NewWriterSize(w, backupBuffer)
	var meta snapshot.Meta
	var err error
	if variant.Of(s.fs) == variant.BackupLive {
		meta, err = s.backupLive(bw)
	} else {
		var view *layered.Map
		var leases []record.Lease
		if view, leases, err = s.view(); err != nil {
			return 0, fmt.Errorf("kv: backup: %w", err)
		}
		defer view.Close()
		meta = snapshot.Meta{Revision: view.Revision(), Count: uint64(view.Len())}
		var scanErr error
		err = snapshot.EncodeLeases(guarded{bw, &scanErr}, meta, leases, entries(view.All(nil, nil), &scanErr))
		if scanErr != nil {
			err = scanErr
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return 0, fmt.Errorf("kv: backup: %w", err)
	}
	return meta.Revision, nil
}

// backupLive is the BackupLive variant's backup: it reads the live map a
// key at a time, under the lock for each, instead of a frozen view, and
// takes the revision when it is done. Writes that land between its reads
// leave a file whose keys are of several revisions, labelled with the
// last: a valid file, but not the map at its revision.
func (s *Store) backupLive(w io.Writer) (snapshot.Meta, error) {
	var entries []*record.Entry
	var after []byte
	for {
		var next *record.Entry
		s.mu.Lock()
		for e, err := range s.m.AllStable(after, nil) {
			if err != nil {
				s.mu.Unlock()
				return snapshot.Meta{}, err
			}
			if after != nil && bytes.Equal(e.Key, after) {
				continue
			}
			c := *e
			next = &c
			break
		}
		s.mu.Unlock()
		if next == nil {
			break
		}
		entries = append(entries, next)
		after = next.Key
		// A pause, so that the writes a long backup would see land
		// between the reads of a small map's backup too.
		time.Sleep(200 * time.Microsecond)
	}
	s.mu.RLock()
	meta := snapshot.Meta{Revision: s.m.Revision(), Count: uint64(len(entries))}
	var leases []record.Lease
	if s.leases != nil {
		leases = s.leases.All()
	}
	s.mu.RUnlock()
	return meta, snapshot.EncodeLeases(w, meta, leases, func(yield func(*record.Entry) bool) {
		for _, e := range entries {
			if !yield(e) {
				return
			}
		}
	})
}

// Hash returns the digest of the store's map: its revision, its number of
// keys and leases and its content hash, all of one copy-on-write view
// (see Backup): the map as committed, with the keys of a lease whose
// expiry is not committed yet. After Close it returns ErrClosed.
func (s *Store) Hash() (Digest, error) {
	if s.closed.Load() {
		return Digest{}, ErrClosed
	}
	view, leases, err := s.view()
	if err != nil {
		return Digest{}, err
	}
	defer view.Close()
	h, err := view.Hash()
	if err != nil {
		return Digest{}, err
	}
	return Digest{Revision: view.Revision(), Keys: int64(view.Len()), Leases: int64(len(leases)), Hash: h}, nil
}

// ErrBackupDiffers is matched by the *DiffError that CompareBackup
// returns when a store and a backup hold different maps or leases.
var ErrBackupDiffers = errors.New("kv: the store differs from the backup")

// DiffError is the first difference CompareBackup finds between a store
// and a backup, in the backup's order (its leases, then its keys): a
// lease (Lease set) or a key (Key set), and what differs. It matches
// ErrBackupDiffers.
type DiffError struct {
	File   string // the backup
	Lease  LeaseID
	Key    []byte
	Reason string
}

// Error implements error.
func (e *DiffError) Error() string {
	at := fmt.Sprintf("key %q", e.Key)
	if e.Key == nil {
		at = fmt.Sprintf("lease %d", e.Lease)
	}
	return fmt.Sprintf("%v: %s at %s: %s", ErrBackupDiffers, e.File, at, e.Reason)
}

// Unwrap returns ErrBackupDiffers.
func (e *DiffError) Unwrap() error { return ErrBackupDiffers }

// CompareBackup compares the store, as of one view (see Backup), with the
// backup in file on the store's file system: every key's value, create
// and mod revisions and version, and every lease's TTL, deadline and
// keys. It returns the store's digest and the backup's. When they differ
// it returns a *DiffError naming the first lease or key that does; it
// reads the whole backup all the same, and a damaged one is its error
// (ErrBackupCorrupt) rather than the difference. The revisions may
// differ while nothing else does (a repair's skip record): that is not a
// difference.
func (s *Store) CompareBackup(file string) (store, backup Digest, err error) {
	if s.closed.Load() {
		return Digest{}, Digest{}, ErrClosed
	}
	view, leases, err := s.view()
	if err != nil {
		return Digest{}, Digest{}, err
	}
	defer view.Close()
	store = Digest{Revision: view.Revision(), Keys: int64(view.Len()), Leases: int64(len(leases))}
	h := record.NewHasher()
	var scanErr error
	next, stop := iter.Pull(entries(view.AllStable(nil, nil), &scanErr))
	defer stop()
	cur, more := next()
	var diff *DiffError
	differ := func(key []byte, id LeaseID, format string, args ...any) {
		if diff == nil {
			diff = &DiffError{File: file, Lease: id, Key: bytes.Clone(key), Reason: fmt.Sprintf(format, args...)}
		}
	}
	var theirs []record.Lease
	leasesDone := false
	compareLeases := func() {
		leasesDone = true
		compareLeaseTables(leases, theirs, differ)
	}
	r := newBackupReader(file, func(b Entry) error {
		if !leasesDone {
			compareLeases()
		}
		for more && bytes.Compare(cur.Key, b.Key) < 0 {
			differ(cur.Key, 0, "in the store, not in the backup")
			h.Add(cur)
			cur, more = next()
		}
		switch {
		case !more || !bytes.Equal(cur.Key, b.Key):
			differ(b.Key, 0, "in the backup, not in the store")
			return nil
		case !bytes.Equal(cur.Value, b.Value):
			differ(b.Key, 0, "value %q in the store, %q in the backup", cur.Value, b.Value)
		case cur.CreateRev != b.CreateRev:
			differ(b.Key, 0, "create revision %d in the store, %d in the backup", cur.CreateRev, b.CreateRev)
		case cur.ModRev != b.ModRev:
			differ(b.Key, 0, "mod revision %d in the store, %d in the backup", cur.ModRev, b.ModRev)
		case cur.Version != b.Version:
			differ(b.Key, 0, "version %d in the store, %d in the backup", cur.Version, b.Version)
		}
		h.Add(cur)
		cur, more = next()
		return nil
	})
	r.lease = func(le *record.Lease) { theirs = append(theirs, *le) }
	backup, err = r.done(image.ReadAny(s.fs, file, r.meta, r.leaseFrame, r.entry))
	if err != nil {
		return store, Digest{}, err
	}
	if !leasesDone {
		compareLeases()
	}
	for ; more; cur, more = next() {
		differ(cur.Key, 0, "in the store, not in the backup")
		h.Add(cur)
	}
	if scanErr != nil {
		return store, backup, scanErr
	}
	store.Hash = h.Sum()
	if diff != nil {
		return store, backup, diff
	}
	return store, backup, nil
}

// compareLeaseTables reports to differ the first lease, in id order, that
// differs between ours and theirs (both in ascending id order).
func compareLeaseTables(ours, theirs []record.Lease, differ func([]byte, LeaseID, string, ...any)) {
	i, j := 0, 0
	for i < len(ours) || j < len(theirs) {
		switch {
		case j == len(theirs) || i < len(ours) && ours[i].ID < theirs[j].ID:
			differ(nil, ours[i].ID, "in the store, not in the backup")
			return
		case i == len(ours) || theirs[j].ID < ours[i].ID:
			differ(nil, theirs[j].ID, "in the backup, not in the store")
			return
		}
		a, b := &ours[i], &theirs[j]
		switch {
		case a.TTL != b.TTL:
			differ(nil, a.ID, "ttl %v in the store, %v in the backup", time.Duration(a.TTL), time.Duration(b.TTL))
			return
		case a.Deadline != b.Deadline:
			differ(nil, a.ID, "deadline %v in the store, %v in the backup",
				time.Unix(0, a.Deadline).UTC().Format(time.RFC3339Nano), time.Unix(0, b.Deadline).UTC().Format(time.RFC3339Nano))
			return
		case !slices.EqualFunc(a.Keys, b.Keys, bytes.Equal):
			differ(nil, a.ID, "keys %q in the store, %q in the backup", a.Keys, b.Keys)
			return
		}
		i, j = i+1, j+1
	}
}

// backupReader verifies a backup as it is decoded and computes its
// digest.
type backupReader struct {
	file  string
	fn    func(Entry) error
	lease func(*record.Lease) // optional, with each lease
	d     Digest
	h     *record.Hasher
	// covered is the meta frame's covered segment: 0 for a backup,
	// another number for a snapshot copied out of a directory.
	covered wal.SegmentNum
}

func newBackupReader(file string, fn func(Entry) error) *backupReader {
	return &backupReader{file: file, fn: fn, h: record.NewHasher()}
}

func (r *backupReader) meta(m snapshot.Meta) error {
	r.d.Revision, r.covered = m.Revision, m.Covered
	return nil
}

func (r *backupReader) leaseFrame(le *record.Lease) error {
	r.d.Leases++
	if r.lease != nil {
		r.lease(le)
	}
	return nil
}

func (r *backupReader) entry(e *record.Entry) error {
	r.h.Add(e)
	r.d.Keys++
	if r.fn != nil {
		return r.fn(*e)
	}
	return nil
}

// done turns the decoder's outcome into the backup's.
func (r *backupReader) done(err error) (Digest, error) {
	if err != nil {
		return Digest{}, backupError(err, r.file)
	}
	r.d.Hash = r.h.Sum()
	return r.d, nil
}

// backupError turns the snapshot decoder's errors into the backup's.
func backupError(err error, file string) error {
	var ce *corrupt.Error
	if errors.As(err, &ce) {
		switch ce.Err {
		case snapshot.ErrCorrupt:
			return &corrupt.Error{Err: ErrBackupCorrupt, File: file, Offset: ce.Offset, Reason: ce.Reason}
		case snapshot.ErrVersion:
			return &corrupt.Error{Err: ErrBackupVersion, File: file, Offset: ce.Offset, Reason: ce.Reason}
		}
	}
	return err
}

// ReadBackup verifies the backup in file, on the file system of opts
// (nil: the operating system's), and returns its digest. With fn, it
// calls fn with each entry in key order as it goes: the entry's Key and
// Value are lent for the call (copy them to keep them), and fn may run
// before damage later in the file is found, so discard what it built if
// ReadBackup returns an error. An error from fn ends the read and is
// returned as it is.
//
// A snapshot copied out of a data directory is a backup too, of any
// version a data directory holds (1 to 5: an image is verified whole
// first, image.ReadAny).
//
// A damaged backup is an error matching ErrBackupCorrupt, a *CorruptError
// naming file and the offset of the frame that holds the damage; a backup
// of a format version this build does not read matches ErrBackupVersion.
func ReadBackup(file string, opts *Options, fn func(Entry) error) (Digest, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := newBackupReader(file, fn)
	return r.done(image.ReadAny(o.fs(), file, r.meta, r.leaseFrame, r.entry))
}

// DecodeBackup is ReadBackup on a backup held in memory; its errors name
// the file "backup".
func DecodeBackup(b []byte, fn func(Entry) error) (Digest, error) {
	r := newBackupReader("backup", fn)
	return r.done(snapshot.DecodeLeases(b, r.meta, r.leaseFrame, r.entry))
}

// Restore makes dir a data directory holding the backup in file (both on
// the file system of opts; nil: the operating system's) and returns the
// backup's digest. dir must not exist or be empty (else
// ErrRestoreNotEmpty); Restore creates it, takes its lock, copies the
// backup in as the directory's snapshot while verifying it, creates the
// log segment that follows the snapshot, and then opens the directory
// read-only and checks that its map has the backup's content hash
// (FORMAT.md, "Backup", has the steps); last, it writes the directory's
// marker (recovery.MarkerName), so that dir is a store from then on. The
// restored store's revision is the backup's, and its next write gets the
// next one; with RestoreAbove(rev), the next write gets a revision above
// both the backup's and rev.
//
// A damaged backup is refused as ReadBackup refuses it, before anything
// but the directory and its lock file is written. A Restore that dies
// part way leaves a directory that Open finds empty or refuses: remove it
// and restore again.
func Restore(file, dir string, opts *Options, ropts ...RestoreOption) (Digest, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var rc restoreConfig
	for _, ro := range ropts {
		ro(&rc)
	}
	if err := checkFloor(rc.above); err != nil {
		return Digest{}, err
	}
	fsys := o.fs()
	src, err := fsys.Open(file)
	if err != nil {
		return Digest{}, err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return Digest{}, err
	}
	lock, err := createEmptyDir(fsys, dir, o.dirMode())
	if err != nil {
		return Digest{}, err
	}
	defer lock.Close()

	// The snapshot, verified as it is copied: Publish removes the copy
	// unless the whole backup checked out.
	r := newBackupReader(file, nil)
	floor := false
	img, err := isImageFile(src)
	if err != nil {
		return Digest{}, err
	}
	err = vfs.Publish(fsys, dir, snapshot.Name, func(w io.Writer) error {
		if img {
			// An image (a snapshot copied out of a data directory) is
			// read by pages, not front to back: it is copied whole,
			// then the copy, which is what Publish will rename into
			// place, is verified whole before anything else is written.
			if _, err := io.Copy(w, io.NewSectionReader(src, 0, fi.Size())); err != nil {
				return err
			}
			if f, ok := w.(interface{ Flush() error }); ok {
				if err := f.Flush(); err != nil {
					return err
				}
			}
			if err := image.ReadAny(fsys, path.Join(dir, snapshot.TmpName), r.meta, r.leaseFrame, r.entry); err != nil {
				return err
			}
		} else {
			tee := io.TeeReader(io.NewSectionReader(src, 0, fi.Size()), w)
			if err := snapshot.DecodeReader(tee, file, fi.Size(), r.meta, r.leaseFrame, r.entry); err != nil {
				return err
			}
		}
		if rc.above <= r.d.Revision {
			return nil
		}
		// A floor above the backup's revision: the segment that follows
		// the snapshot, with the skip to the floor in it, is durable
		// before Publish syncs and renames the snapshot into place, so
		// that no crash leaves the backup's map openable below the
		// floor. The backup is verified by now: a damaged one never
		// gets this far.
		floor = true
		return restoreSegment(fsys, dir, r.covered+1, &o, rc.above)
	})
	d, err := r.done(err)
	if err != nil {
		return Digest{}, err
	}
	// The segment that follows the snapshot: recovery requires it, as a
	// checkpoint creates it durably before its snapshot.
	if !floor {
		if err := restoreSegment(fsys, dir, r.covered+1, &o, 0); err != nil {
			return Digest{}, err
		}
	}

	// The restored directory must open to the backup's map and leases.
	ro := o
	ro.ReadOnly = true
	s, err := Open(dir, &ro)
	if err != nil {
		return Digest{}, fmt.Errorf("kv: restore: the restored directory does not open: %w", err)
	}
	got, _, err := s.CompareBackup(file)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	want := d
	if floor {
		want.Revision = rc.above
	}
	if err == nil && got != want {
		err = fmt.Errorf("%s opens at revision %d with %d keys and %d leases, hash %s; want revision %d, and the backup's %d keys, %d leases, hash %s",
			dir, got.Revision, got.Keys, got.Leases, got.Hash, want.Revision, d.Keys, d.Leases, d.Hash)
	}
	if err != nil {
		return Digest{}, fmt.Errorf("kv: restore: %w", err)
	}
	// The marker, last: dir is a store before its first writable open
	// (which would otherwise adopt it and write the marker then), and a
	// marked directory always holds its snapshot and segment durably.
	if err := recovery.WriteMarker(fsys, dir); err != nil {
		return Digest{}, err
	}
	return d, nil
}

// isImageFile reports whether f starts as a snapshot of a version above
// package snapshot's (an image, version 3 to 5, or a later version, which
// image.ReadAny refuses naming every version this build reads).
func isImageFile(f vfs.File) (bool, error) {
	var h [8]byte
	n, err := f.ReadAt(h[:], 0)
	if n < len(h) {
		if err != nil && err != io.EOF {
			return false, err
		}
		return false, nil // too short: the decoder says why
	}
	return string(h[:6]) == "KVSNAP" && binary.LittleEndian.Uint16(h[6:]) > snapshot.Version, nil
}

// createEmptyDir creates dir if it does not exist, makes its name
// durable, and returns its lock, taken exclusively, once dir holds
// nothing else.
func createEmptyDir(fsys vfs.FS, dir string, mode os.FileMode) (vfs.File, error) {
	fi, err := fsys.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := fsys.MkdirAll(dir, mode); err != nil {
			return nil, err
		}
		// The directory's name must survive a power loss along with
		// what is restored into it.
		if err := vfs.SyncDir(fsys, path.Dir(path.Clean(dir))); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, fmt.Errorf("kv: restore into %s: not a directory", dir)
	}
	if err := notEmpty(fsys, dir, nil); err != nil {
		return nil, err
	}
	name := path.Join(dir, LockName)
	lock, err := fsys.Lock(name, true)
	if errors.Is(err, vfs.ErrLocked) {
		return nil, &LockedError{Dir: dir, PID: lockfile.Holder(fsys, name)}
	}
	if err != nil {
		return nil, err
	}
	// Another process may have come in between the check and the lock.
	if err := notEmpty(fsys, dir, map[string]bool{LockName: true}); err != nil {
		lock.Close()
		return nil, err
	}
	// The pid is for error messages only; it need not be durable.
	lock.Truncate(0)
	lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return lock, nil
}

// notEmpty returns ErrRestoreNotEmpty, naming a file, when dir holds a
// file that is not in allowed.
func notEmpty(fsys vfs.FS, dir string, allowed map[string]bool) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !allowed[n] {
			return fmt.Errorf("%w: %s holds %s", ErrRestoreNotEmpty, dir, n)
		}
	}
	return nil
}
