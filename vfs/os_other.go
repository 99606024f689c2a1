//go:build !linux

package vfs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// The portable twins of os_linux.go. They let the module build and run
// on other Unix systems; the store's durability promise (docs/promises.md)
// is made and crash-tested on Linux only.

// dataSyncOp names dataSync in errors.
const dataSyncOp = "fsync"

// dataSync is fsync(2) where fdatasync is not to be had. It is at least
// as strong: fsync flushes the file's data and all of its metadata, of
// which fdatasync's (the size, and what reading the data back needs) is
// a part. On macOS neither flushes the drive's own write cache
// (F_FULLFSYNC does), one of the reasons the promise is Linux's.
func dataSync(fd int) error { return unix.Fsync(fd) }

// fadviseWillNeed does nothing: the hint is not to be had everywhere, and
// the readers' large sequential reads start the kernel's read-ahead
// anyway.
func fadviseWillNeed(fd int) {}

// fallocate is unsupported here. Preallocate then reserves nothing and
// returns nil, as on a Linux file system without fallocate: the log's
// writer writes its zeros over the space instead, which allocates it.
func fallocate(fd int, off, n int64) error { return errors.ErrUnsupported }

// freeSpace is not asked of the platform here: callers assume there is
// room, and meet ENOSPC when there is not.
func freeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }

// watchDirOS polls: this platform's change notification is not used.
func watchDirOS(string) (DirWatch, error) { return pollWatch{}, nil }

// lockTable: no table of locks is read here; LockHolder names no one.
const lockTable = false

func lockHolder(string) int { return 0 }

// readDirect is not asked of the platform here: a reader cannot read
// past the cache, and says so.
func readDirect(string, []byte, int64) (int, error) { return 0, ErrNotSupported }
