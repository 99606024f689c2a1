// Package window reads a file through a buffer of a megabyte or more, for
// the salvage readers of the snapshot formats (snapshot and
// snapshot/image), which read a damaged file piece by piece, mostly in
// order, and must not load a whole file they cannot trust.
package window

import (
	"io"

	"github.com/kvstore/kv/vfs"
)

// Window reads f, whose size is known, a megabyte at a time.
type Window struct {
	f    vfs.File
	size int64
	base int64
	buf  []byte
}

// New returns a Window on f, of size bytes.
func New(f vfs.File, size int64) *Window { return &Window{f: f, size: size} }

// At returns the bytes from off to off+n, fewer where the file ends (none
// at or past its end). The slice is valid until the next call.
func (w *Window) At(off int64, n int) ([]byte, error) {
	end := min(off+int64(n), w.size)
	if off < 0 || off >= end {
		return nil, nil
	}
	if off >= w.base && end <= w.base+int64(len(w.buf)) {
		return w.buf[off-w.base : end-w.base], nil
	}
	size := min(max(end-off, 1<<20), w.size-off)
	if int64(cap(w.buf)) < size {
		w.buf = make([]byte, size)
	}
	w.buf, w.base = w.buf[:size], off
	if k, err := w.f.ReadAt(w.buf, off); err != nil && !(err == io.EOF && int64(k) == size) {
		w.buf = w.buf[:0]
		return nil, err
	}
	return w.buf[:end-off], nil
}
