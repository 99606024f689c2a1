package vfs

import "errors"

// ErrLocked is returned by FS.Lock when another holder has a conflicting
// lock on the file.
var ErrLocked = errors.New("vfs: file is locked by another holder")

// ErrNotSupported is returned by an operation that the file system cannot
// perform, such as a directory sync on a file system without directories.
var ErrNotSupported = errors.New("vfs: operation not supported")

// ErrNotRegular is returned, in an *os.PathError naming the file and
// saying what it is (symbolic link, directory, FIFO, socket, device), by
// Open and OpenReadWrite when the name is not a regular file. The store's
// files are all regular: anything else under their names was put there by
// someone else, and is never read or written through.
var ErrNotRegular = errors.New("vfs: not a regular file")

// ErrMapFault is matched by the *FaultError that Mapping.CatchFault makes
// of a fault on a mapped file: the kernel could not give the page (an I/O
// error of the disk), or the file is shorter than when it was mapped.
var ErrMapFault = errors.New("vfs: fault reading a mapped file")
