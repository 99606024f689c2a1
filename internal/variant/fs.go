package variant

import (
	"errors"
	"path"
	"strings"
	"sync"

	"github.com/kvstore/kv/vfs"
)

// Of returns the variant the file system carries (see Wrap); None for any
// other file system, and always in a kvrelease build.
func Of(fsys vfs.FS) Bug {
	if !Enabled {
		return None
	}
	// By concrete type, as vfs finds its fast paths: an interface
	// assertion's first use in a process builds an itab, on the path of
	// every open.
	if b, ok := fsys.(*bugFS); ok {
		return b.bug
	}
	return None
}

// Wrap returns fsys carrying the variant b: the store opened on it has
// the defect. For None, and in a kvrelease build, it returns fsys itself.
func Wrap(fsys vfs.FS, b Bug) vfs.FS {
	if b == None || !Enabled {
		return fsys
	}
	return &bugFS{FS: fsys, bug: b, held: map[string]bool{}}
}

// bugFS carries a variant, and is where the variants that leave out or
// misplace a sync do so.
type bugFS struct {
	vfs.FS
	bug Bug

	mu   sync.Mutex
	held map[string]bool // *.tmp files whose sync waits for their rename
}

// NewSalt passes the salt source of the file system below on (see
// wal.Salter), so that a simulation stays repeatable with a variant on.
func (b *bugFS) NewSalt() uint64 {
	if s, ok := b.FS.(interface{ NewSalt() uint64 }); ok {
		return s.NewSalt()
	}
	return 0
}

// FreeSpace passes the question on (see vfs.SpaceFS), so that a store
// with a variant on reserves log space as the correct store does.
func (b *bugFS) FreeSpace(dir string) (int64, error) {
	if n, ok := vfs.FreeSpace(b.FS, dir); ok {
		return n, nil
	}
	return 0, errors.ErrUnsupported
}

func (b *bugFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &bugFile{File: f, fs: b, name: name}, nil
}

// Create implements vfs.FS.
func (b *bugFS) Create(name string) (vfs.File, error) {
	f, err := b.FS.Create(name)
	return b.wrap(name, f, err)
}

// Open implements vfs.FS.
func (b *bugFS) Open(name string) (vfs.File, error) {
	f, err := b.FS.Open(name)
	return b.wrap(name, f, err)
}

// OpenReadWrite implements vfs.FS.
func (b *bugFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := b.FS.OpenReadWrite(name)
	return b.wrap(name, f, err)
}

// OpenDir implements vfs.FS.
func (b *bugFS) OpenDir(name string) (vfs.File, error) {
	f, err := b.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &bugFile{File: f, fs: b, name: name, dir: true}, nil
}

// Rename implements vfs.FS: under RenameBeforeFsync the sync held back
// from a *.tmp file happens now, after its rename.
func (b *bugFS) Rename(oldname, newname string) error {
	if err := b.FS.Rename(oldname, newname); err != nil {
		return err
	}
	b.mu.Lock()
	held := b.held[oldname]
	delete(b.held, oldname)
	b.mu.Unlock()
	if !held {
		return nil
	}
	f, err := b.FS.OpenReadWrite(newname)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type bugFile struct {
	vfs.File
	fs   *bugFS
	name string
	dir  bool
	// commit reports that the last write to this log segment that did
	// not start with a zero began with a data record (type 2): its sync
	// is a commit's, which no-sync leaves out. A header (1) or a seal
	// (3) is synced: no-sync breaks the acknowledgement, not the log's
	// structure. Part of the test machinery, keyed to FORMAT.md's record
	// types.
	commit bool
}

// WriteAt implements vfs.File, noting what kind of record was written.
func (f *bugFile) WriteAt(p []byte, off int64) (int, error) {
	if len(p) > 0 && p[0] != 0 {
		f.commit = p[0] == 2
	}
	return f.File.WriteAt(p, off)
}

func isLog(name string) bool { return strings.HasPrefix(path.Base(name), "log.") }

// Sync implements vfs.File, leaving out or misplacing the sync as the
// variant says.
func (f *bugFile) Sync() error {
	switch b := f.fs.bug; {
	case f.dir && b == NoDirSync:
		return nil
	case f.dir:
		return f.File.Sync()
	case b == NoSync && isLog(f.name) && f.commit:
		return nil
	case b == RenameBeforeFsync && strings.HasSuffix(f.name, ".tmp"):
		f.fs.mu.Lock()
		f.fs.held[f.name] = true
		f.fs.mu.Unlock()
		return nil
	case b == RetrySync && isLog(f.name):
		err := f.File.Sync()
		if err != nil {
			err = f.File.Sync() // the defect: trust a retry
		}
		return err
	}
	return f.File.Sync()
}

// ReadDurableAt passes a durable read on to the file system below
// (vfs.DurableReader).
func (f *bugFS) ReadDurableAt(name string, p []byte, off int64) (int, error) {
	return vfs.ReadDurableAt(f.FS, name, p, off)
}
