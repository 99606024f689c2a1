package kv

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"syscall"

	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// openUndo is what an Open that creates a store undoes when it fails, so
// that a failed Open leaves the directory as it found it: the files it
// added, and the directories it made.
type openUndo struct {
	dir      string
	creating bool     // the directory held no store: Open was creating one
	before   []string // the names in it before (an empty directory may hold LOCK)
	madeTop  string   // the highest directory MkdirAll made, if it made any
}

// run removes the store's files that the open added (LOCK last, while
// its caller still holds the lock). It is called only when the directory
// held no store before the open: every such file is the open's. The
// removals need not be durable: what comes back after a crash is what a
// crash while creating a store leaves, which is still no store (see
// recovery.DirEmpty).
func (u *openUndo) run(fsys vfs.FS) {
	if u == nil || !u.creating {
		return
	}
	names, err := fsys.List(u.dir)
	if err != nil {
		return
	}
	lock := false
	for _, n := range names {
		if slices.Contains(u.before, n) {
			continue
		}
		_, seg := wal.ParseSegmentName(n)
		switch {
		case n == recovery.LockName:
			lock = true
		case seg, n == recovery.MarkerName, n == recovery.MarkerName+".tmp",
			n == snapshot.Name, n == snapshot.TmpName:
			fsys.Remove(path.Join(u.dir, n))
		}
	}
	if lock {
		fsys.Remove(path.Join(u.dir, recovery.LockName))
	}
}

// removeDir removes the directories the open made, from the data
// directory up, each only if empty.
func (u *openUndo) removeDir(fsys vfs.FS) {
	if u == nil || u.madeTop == "" {
		return
	}
	for p := path.Clean(u.dir); ; p = path.Dir(p) {
		if fsys.Remove(p) != nil || p == u.madeTop || p == path.Dir(p) {
			return
		}
	}
}

// describeOpenError adds what to do to an error of Open that a full file
// system caused.
func describeOpenError(dir string, err error) error {
	return withSpaceHint(dir, err)
}

// withSpaceHint adds what to do to an error that a full file system
// (ENOSPC, or EDQUOT: over quota) caused. The error still matches the
// errno.
func withSpaceHint(dir string, err error) error {
	if err == nil || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return err
	}
	return fmt.Errorf("%w (the file system holding %s is full: free some space on it and try again; "+
		"every acknowledged write is on disk, and the next open goes on from here)", err, dir)
}
