package kv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Online backup and restore (FORMAT.md, "Backup"): a backup is the map at
// one revision in the snapshot's encoding, covered segment 0, written from
// the copy-on-write view that a scan or a checkpoint takes, so that
// writers wait only for the clone. Restore turns one into a new data
// directory whose revisions continue above the backup's.
//
// TODO(leases): once the store has leases, a backup must carry them. The
// view below must then hold the leases as of its revision, Backup must
// write them in the frame type FORMAT.md reserves (snapshot's frameLease),
// and Restore must check that every key's lease is among them.

// Hash is a map's content hash (FORMAT.md, "Content hash"): SHA-256 of
// every key's value, create and mod revisions and version, in key order.
// Its String method gives the 64 hexadecimal digits kv DIR stat prints.
type Hash = record.Hash

// Digest identifies a map: its revision, its number of keys and its
// content hash. Two maps with the same Hash have the same keys with the
// same values, revisions and versions.
type Digest struct {
	Revision Revision
	Keys     int64
	Hash     Hash
}

// CorruptError is the error that names a damaged file and the byte offset
// of the damage (for a backup, of the frame that holds it): it matches
// its sentinel, such as ErrBackupCorrupt, with errors.Is. It is the same
// type as wal.CorruptError.
type CorruptError = corrupt.Error

// backupBuffer is the size of the buffer Backup writes through.
const backupBuffer = 256 << 10

// view returns a copy-on-write clone of the visible map: what a scan
// reads. Clone brings the ordered tree up to date and copies its root, so
// writers wait for that alone.
func (s *Store) view() *record.Map {
	// Clone writes to the tree's copy-on-write bookkeeping, so it needs
	// the write lock.
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Clone()
}

// Backup writes a backup of the store to w: every key as of one revision,
// which it returns, in the snapshot encoding (FORMAT.md, "Backup"),
// checksummed end to end. Writers go on meanwhile: Backup reads a
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
		view := s.view()
		meta = snapshot.Meta{Revision: view.Revision(), Count: uint64(view.Len())}
		err = snapshot.Encode(bw, meta, view.All(nil, nil))
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
		for e := range s.m.All(after, nil) {
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
	s.mu.RUnlock()
	return meta, snapshot.Encode(w, meta, func(yield func(*record.Entry) bool) {
		for _, e := range entries {
			if !yield(e) {
				return
			}
		}
	})
}

// Hash returns the digest of the store's map: its revision, its number of
// keys and its content hash, all of one copy-on-write view (see Backup).
// After Close it returns ErrClosed.
func (s *Store) Hash() (Digest, error) {
	if s.closed.Load() {
		return Digest{}, ErrClosed
	}
	view := s.view()
	return Digest{Revision: view.Revision(), Keys: int64(view.Len()), Hash: view.Hash()}, nil
}

// backupReader verifies a backup as it is decoded and computes its
// digest.
type backupReader struct {
	file string
	fn   func(Entry) error
	d    Digest
	h    *record.Hasher
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
// A damaged backup is an error matching ErrBackupCorrupt, a *CorruptError
// naming file and the offset of the frame that holds the damage; a backup
// of a format version this build does not read matches ErrBackupVersion.
func ReadBackup(file string, opts *Options, fn func(Entry) error) (Digest, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := newBackupReader(file, fn)
	return r.done(snapshot.ReadFile(o.fs(), file, r.meta, r.entry))
}

// DecodeBackup is ReadBackup on a backup held in memory; its errors name
// the file "backup".
func DecodeBackup(b []byte, fn func(Entry) error) (Digest, error) {
	r := newBackupReader("backup", fn)
	return r.done(snapshot.Decode(b, r.meta, r.entry))
}

// Restore makes dir a data directory holding the backup in file (both on
// the file system of opts; nil: the operating system's) and returns the
// backup's digest. dir must not exist or be empty (else
// ErrRestoreNotEmpty); Restore creates it, takes its lock, copies the
// backup in as the directory's snapshot while verifying it, creates the
// log segment that follows the snapshot, and then opens the directory
// read-only and checks that its map has the backup's content hash
// (FORMAT.md, "Backup", has the steps). The restored store's revision is
// the backup's, and its next write gets the next one.
//
// A damaged backup is refused as ReadBackup refuses it, before anything
// but the directory and its lock file is written. A Restore that dies
// part way leaves a directory that Open finds empty or refuses: remove it
// and restore again.
func Restore(file, dir string, opts *Options) (Digest, error) {
	var o Options
	if opts != nil {
		o = *opts
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
	err = vfs.Publish(fsys, dir, snapshot.Name, func(w io.Writer) error {
		tee := io.TeeReader(io.NewSectionReader(src, 0, fi.Size()), w)
		return snapshot.DecodeReader(tee, file, fi.Size(), r.meta, nil, r.entry)
	})
	d, err := r.done(err)
	if err != nil {
		return Digest{}, err
	}
	// The segment that follows the snapshot: recovery requires it, as a
	// checkpoint creates it durably before its snapshot.
	w, err := wal.Create(fsys, dir, r.covered+1, o.walOptions())
	if err != nil {
		return Digest{}, err
	}
	if err := w.Close(); err != nil {
		return Digest{}, err
	}

	// The restored directory must open to the backup's map.
	ro := o
	ro.ReadOnly = true
	s, err := Open(dir, &ro)
	if err != nil {
		return Digest{}, fmt.Errorf("kv: restore: the restored directory does not open: %w", err)
	}
	got, err := s.Hash()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Digest{}, err
	}
	if got != d {
		return Digest{}, fmt.Errorf("kv: restore: %s opens at revision %d with %d keys, hash %s; the backup holds revision %d, %d keys, hash %s",
			dir, got.Revision, got.Keys, got.Hash, d.Revision, d.Keys, d.Hash)
	}
	return d, nil
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
		s := &Store{fs: fsys}
		return nil, &LockedError{Dir: dir, PID: s.holderPID(name)}
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
