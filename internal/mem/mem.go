package mem

import (
	"sync/atomic"
	"unsafe"
)

// MinPopulate is the smallest allocation worth a system call: below it,
// the pages are left to fault one by one as they are written.
const MinPopulate = 64 << 10

const pageSize = 4096

// unsupported is set once the kernel refuses MADV_POPULATE_WRITE (it
// came in Linux 5.14), or on a platform without it: pages then fault as
// they are written, as they would without Populate.
var unsupported atomic.Bool

// Populate maps, writable, every whole page in the capacity of b, which
// must be memory the caller is about to fill. It changes no byte of b.
// It does nothing for a b smaller than MinPopulate, and nothing when the
// kernel cannot; a failure to populate is not an error, since the pages
// are mapped anyway when they are first written.
func Populate(b []byte) {
	if cap(b) < MinPopulate || unsupported.Load() {
		return
	}
	b = b[:cap(b)]
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (base + pageSize - 1) &^ (pageSize - 1)
	end := (base + uintptr(len(b))) &^ (pageSize - 1)
	if end <= start {
		return
	}
	if !populateWrite(b[start-base : end-base]) {
		unsupported.Store(true)
	}
}

// PopulateSlice is Populate for the backing array of a slice of any
// element type: it changes no element.
func PopulateSlice[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	var zero T
	n := cap(s) * int(unsafe.Sizeof(zero))
	Populate(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))), n))
}
