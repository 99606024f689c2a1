package mem

import "golang.org/x/sys/unix"

// populateWrite maps every page of b, which is page-aligned, writable:
// madvise(MADV_POPULATE_WRITE). It reports false when the kernel does not
// know the advice (before Linux 5.14); any other failure is ignored, since
// the pages are mapped anyway when they are first written.
func populateWrite(b []byte) bool {
	err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	return err != unix.EINVAL && err != unix.ENOSYS
}
