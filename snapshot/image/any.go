package image

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// The readers of a data directory meet a snapshot of any version the
// store has written: versions 1 and 2 (package snapshot's frames), 3 to 5
// (this package's image). The functions below look at the version in the
// file's header and hand the file to the reader of that version, so that
// a caller reads every version with one call. They live here, not in
// package snapshot, because this package builds on that one.

// headerVersion returns the format version in the header of file name,
// and whether the header is a snapshot's (six bytes of magic, then the
// version); a file too short or with another magic is not.
func headerVersion(fsys vfs.FS, name string) (uint16, bool, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	return fileVersion(f)
}

// mappedVersion is fileVersion of the file mapped in m; a fault reading
// it (a file cut shorter than its mapping) is a *vfs.FaultError.
func mappedVersion(m *vfs.Mapping) (v uint16, ok bool, err error) {
	defer m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	b := m.Bytes()
	if len(b) < fileHeaderSize || [6]byte(b[:6]) != magic {
		return 0, false, nil
	}
	return u16(b, 6), true, nil
}

// fileVersion is headerVersion of the open file f.
func fileVersion(f vfs.File) (uint16, bool, error) {
	var h [fileHeaderSize]byte
	if n, err := f.ReadAt(h[:], 0); n < len(h) {
		if err != nil && err != io.EOF {
			return 0, false, err
		}
		return 0, false, nil
	}
	if [6]byte(h[:6]) != magic {
		return 0, false, nil
	}
	return u16(h[:], 6), true, nil
}

// isImage reports whether file name is a snapshot of version 3 to 5,
// and fails as versionKnown does.
func isImage(fsys vfs.FS, name string) (bool, error) {
	v, ok, err := headerVersion(fsys, name)
	if err != nil || !ok {
		return false, err
	}
	return versionKnown(name, v)
}

// versionKnown reports whether v, the version in the header of a
// snapshot's file name, is an image's (3 to 5); one of package
// snapshot's (1 and 2) is not. Any other version is snapshot.ErrVersion
// naming every version this build reads, where package snapshot's
// reader would name only its own.
func versionKnown(name string, v uint16) (bool, error) {
	switch {
	case isImageVersion(v):
		return true, nil
	case v >= 1 && v <= snapshot.Version:
		return false, nil
	}
	return false, &corrupt.Error{Err: snapshot.ErrVersion, File: name, Offset: 6,
		Reason: fmt.Sprintf("snapshot format version %d, this build reads versions 1 to %d", v, Version)}
}

// ReadAny reads the snapshot in file name, of version 1 to 5, and
// verifies it whole, calling meta, lease and entry as
// snapshot.ReadFileLeases does (each may be nil): the first record, then
// each live lease with its keys (copies), then each entry in key order,
// lent for the call. A missing file is an error matching fs.ErrNotExist;
// damage is snapshot.ErrCorrupt in a *corrupt.Error naming file and
// offset, another version snapshot.ErrVersion.
//
// An image (version 3 to 5) is opened and verified (Reader.Verify) before any
// lease or entry is handed out, so that damage anywhere in it, its hash
// index included, is found first; meta, which gets the image's Meta with
// its Count and Leases from the footer, is called once the image opened,
// or, when it does not open, with the first record alone if that checks
// out (as the decoder of versions 1 and 2 calls it once the first frame
// checks out, whatever follows), before the error is returned.
func ReadAny(fsys vfs.FS, name string, meta func(snapshot.Meta) error, lease func(*record.Lease) error, entry func(*record.Entry) error) error {
	img, err := isImage(fsys, name)
	if err != nil {
		return err
	}
	if !img {
		return snapshot.ReadFileLeases(fsys, name, meta, lease, entry)
	}
	r, err := Open(fsys, name)
	if err != nil {
		if mt, merr := ReadMeta(fsys, name); merr == nil && meta != nil && !errors.Is(err, vfs.ErrMapFault) {
			if ferr := meta(mt); ferr != nil {
				return ferr
			}
		}
		return err
	}
	defer r.Close()
	if meta != nil {
		if err := meta(r.Meta()); err != nil {
			return err
		}
	}
	if err := r.Verify(); err != nil {
		return err
	}
	les, err := r.Leases()
	if err != nil {
		return err
	}
	if lease != nil {
		for i := range les {
			if err := lease(&les[i]); err != nil {
				return err
			}
		}
	}
	for e, err := range r.All(nil, nil) {
		if err != nil {
			return err
		}
		if entry != nil {
			if err := entry(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// OpenAny opens the snapshot in file name for a store to serve: an image
// (version 3 to 5) is opened, not read: it is checked as Open checks it, and
// its leases as Leases checks them, meta and lease are called (as ReadAny
// calls them), and the Reader returned serves the entries, each block
// verified on its first read. A snapshot of version 1 or 2 is read whole
// and verified as ReadAny reads it, entry called for each entry, and the
// Reader returned is nil. The errors are ReadAny's; on one, nothing is
// left open.
func OpenAny(fsys vfs.FS, name string, meta func(snapshot.Meta) error, lease func(*record.Lease) error, entry func(*record.Entry) error) (*Reader, error) {
	// One mapping of the file serves the look at its version and, for an
	// image, the reader.
	m, err := mapRandom(fsys, name)
	if err != nil {
		return nil, err
	}
	v, ok, err := mappedVersion(m)
	img := false
	if err == nil && ok {
		img, err = versionKnown(name, v)
	}
	if err != nil || !img {
		m.Close()
		if err != nil {
			return nil, err
		}
		return nil, snapshot.ReadFileLeases(fsys, name, meta, lease, entry)
	}
	r, err := openMapping(m, name)
	if err != nil {
		if mt, merr := ReadMeta(fsys, name); merr == nil && meta != nil && !errors.Is(err, vfs.ErrMapFault) {
			if ferr := meta(mt); ferr != nil {
				return nil, ferr
			}
		}
		return nil, err
	}
	err = func() error {
		if meta != nil {
			if err := meta(r.Meta()); err != nil {
				return err
			}
		}
		les, err := r.Leases()
		if err != nil {
			return err
		}
		for i := range les {
			if lease != nil {
				if err := lease(&les[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// ReadAnyMeta reads only the first record of the snapshot in file name,
// of version 1 to 4, checking that record's checksum and nothing else
// (snapshot.ReadMeta, ReadMeta). Of an image it returns the covered
// segment and the revision: its Count and Leases are in the footer,
// which it does not read, and are 0.
func ReadAnyMeta(fsys vfs.FS, name string) (snapshot.Meta, error) {
	img, err := isImage(fsys, name)
	if err != nil {
		return snapshot.Meta{}, err
	}
	if img {
		return ReadMeta(fsys, name)
	}
	var m snapshot.Meta
	err = snapshot.ReadFile(fsys, name, func(meta snapshot.Meta) error {
		m = meta
		return errStopMeta
	}, nil)
	if errors.Is(err, errStopMeta) {
		err = nil
	}
	return m, err
}

var errStopMeta = errors.New("image: stop after the meta record")

// SalvageAny is snapshot.Salvage of a snapshot of version 1 to 4: it
// reads every entry of file name that checks out, whatever damage lies
// around it, and reports the rest (see Salvage for an image).
func SalvageAny(fsys vfs.FS, name string, entry func(*record.Entry) error) (snapshot.Salvaged, error) {
	// A version no reader reads is not refused here: salvage never fails
	// on damage, and package snapshot's reads what frames it finds.
	v, ok, err := headerVersion(fsys, name)
	if err != nil {
		return snapshot.Salvaged{}, err
	}
	if ok && isImageVersion(v) {
		return Salvage(fsys, name, entry)
	}
	return snapshot.Salvage(fsys, name, entry)
}
