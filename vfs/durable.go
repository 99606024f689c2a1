package vfs

import "errors"

// DurableReader is a file system that can read a file's bytes as its
// storage holds them, past any cache of the operating system's.
type DurableReader interface {
	// ReadDurableAt reads len(p) bytes of file name at off as the
	// storage holds them: on Linux with O_DIRECT, which reads the device
	// rather than the page cache (after writing back the range's dirty
	// pages). It returns fewer bytes at the end of the file, with io.EOF,
	// and ErrNotSupported where the file system refuses direct reads.
	ReadDurableAt(name string, p []byte, off int64) (int, error)
}

// ReadDurableAt reads len(p) bytes of file name at off as fsys's storage
// holds them (DurableReader), or returns ErrNotSupported when fsys
// cannot tell (a wrapper that does not pass it on, tmpfs, another OS).
//
// It is how a reader vouches for bytes that a process which is gone may
// have left in the page cache alone: after an fdatasync of the file
// returned, bytes that read back the same past the cache are durable.
// The fdatasync alone is not proof: pages whose write-back failed earlier
// in this boot (a writer's fdatasync that returned EIO) are marked clean
// by ext4 and XFS and stay readable from the cache, and a later
// fdatasync, in a process that did not see the error, returns success
// without writing them.
func ReadDurableAt(fsys FS, name string, p []byte, off int64) (int, error) {
	if d, ok := fsys.(DurableReader); ok {
		return d.ReadDurableAt(name, p, off)
	}
	return 0, ErrNotSupported
}

// IsNotSupported reports whether err says that the file system cannot do
// what was asked (ErrNotSupported, or errors.ErrUnsupported).
func IsNotSupported(err error) bool {
	return errors.Is(err, ErrNotSupported) || errors.Is(err, errors.ErrUnsupported)
}
