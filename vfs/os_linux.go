package vfs

import "golang.org/x/sys/unix"

// The Linux calls of OS, each with its portable twin in os_other.go. The
// store's durability promise rests on these: FORMAT.md's file system
// assumptions are Linux's.

// dataSyncOp names dataSync in errors.
const dataSyncOp = "fdatasync"

// dataSync makes a file's data durable, and its size when it changed,
// without the rest of its metadata (times): fdatasync(2).
func dataSync(fd int) error { return unix.Fdatasync(fd) }

// fadviseWillNeed is posix_fadvise WILLNEED over the whole file. Linux
// starts only about the device's read-ahead size of it (read_ahead_kb;
// bench/RESULTS.md has the measurement); the rest comes from the kernel's
// read-ahead for sequential reads, which the readers' large reads start.
// It is a hint, and its error is of no use to the caller.
func fadviseWillNeed(fd int) { _ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED) }

// fallocate reserves [off, off+n) and extends the file with zeros when
// off+n is past its end (mode 0). A file system without it fails with
// EOPNOTSUPP, which matches errors.ErrUnsupported.
func fallocate(fd int, off, n int64) error { return unix.Fallocate(fd, 0, off, n) }
