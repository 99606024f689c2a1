package vfs

import "errors"

// ErrLocked is returned by FS.Lock when another holder has a conflicting
// lock on the file.
var ErrLocked = errors.New("vfs: file is locked by another holder")

// ErrNotSupported is returned by an operation that the file system cannot
// perform, such as a directory sync on a file system without directories.
var ErrNotSupported = errors.New("vfs: operation not supported")
