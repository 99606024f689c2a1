package vfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// SyncDir makes the entries of directory dir durable: every create, rename
// and remove done in it so far survives a power loss once SyncDir returns.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Publish atomically replaces dir/name with the bytes that write produces:
// it removes a stale dir/name.tmp (durably), creates dir/name.tmp afresh, calls write
// with a buffered writer on it, syncs it, renames it to dir/name and syncs
// dir. When Publish returns nil the new contents are durable under
// dir/name; after a crash at any point dir/name holds either its old or
// its new contents, never a mix.
func Publish(fsys FS, dir, name string, write func(w io.Writer) error) error {
	final := path.Join(dir, name)
	tmp := final + ".tmp"
	// A stale tmp from a crashed writer is never trusted; Create needs the
	// name free. Its removal is made durable before a new tmp takes the
	// name: a crash that kept the rename below but lost the removal and
	// the create (a file system may persist namespace operations in any
	// order a crash model allows) would otherwise move the stale file
	// into place.
	err := fsys.Remove(tmp)
	if err == nil {
		err = SyncDir(fsys, dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			fsys.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(io.NewOffsetWriter(f, 0), 256<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("vfs: write %s: %w", tmp, err)
	}
	// The data must be durable before the name points at it, or a power
	// loss could leave the final name with missing data.
	if err := f.Sync(); err != nil {
		return err
	}
	ok = true
	if err := f.Close(); err != nil {
		return err
	}
	// The rename is the atomic switch from old to new contents.
	if err := fsys.Rename(tmp, final); err != nil {
		return err
	}
	// The rename is durable only once the directory is synced; callers
	// rely on the new file (and delete what it replaces) after we return.
	return SyncDir(fsys, dir)
}
