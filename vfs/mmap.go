package vfs

import (
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is a read-only view of a file's bytes, taken by Map: a memory
// mapping of the file where the File can give one (OS), or else a copy
// read through the File's ReadAt, so that the in-memory file system, the
// fault injector and the recorder serve the same readers (and their
// faults and records see the read).
//
// A byte of a mapping is read from the file when it is first touched: a
// disk error, or a file cut shorter than the mapping by someone else,
// raises SIGBUS then, which Go turns into a crash unless the reading
// goroutine asked for a panic instead (debug.SetPanicOnFault). Readers
// that touch Bytes guard every read so: CatchFault, deferred, turns the
// fault into an error.
type Mapping struct {
	b      []byte
	name   string
	mapped bool // b is a memory mapping, to be unmapped by Close
}

// Map returns a read-only view of the first size bytes of f, which must
// hold at least that many. f may be closed once Map returns: the view
// does not need it. Close the mapping when done; no slice of Bytes may be
// used after that.
func Map(f File, size int64) (*Mapping, error) {
	if size < 0 || size != int64(int(size)) {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: fmt.Errorf("size %d out of range", size)}
	}
	m := &Mapping{name: f.Name()}
	if size == 0 {
		return m, nil
	}
	if mf, ok := f.(*osFile); ok { // the OS's file maps itself
		b, err := mf.mmap(int(size))
		if err != nil {
			return nil, err
		}
		m.b, m.mapped = b, true
		return m, nil
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		err = nil
	} else if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("vfs: read %s to map it: %w", f.Name(), err)
	}
	m.b = b
	return m, nil
}

// MapFile returns a read-only view of the whole of file name, which must
// be a regular file (as FS.Open checks), taken as Map takes it. On the OS
// it opens, checks, maps and closes one descriptor (five system calls
// where Open, Size, Map and Close took seven, and no *os.File); on another
// FS it is Open, Size, Map and Close.
func MapFile(fsys FS, name string) (*Mapping, error) {
	if o, ok := fsys.(osFS); ok { // by concrete type: see Size
		return o.mapFile(name)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	size, err := Size(f)
	var m *Mapping
	if err == nil {
		m, err = Map(f, size)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		m.Close()
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Bytes returns the view. Read it only under CatchFault (see Mapping),
// and not after Close.
func (m *Mapping) Bytes() []byte { return m.b }

// Mapped reports whether the view is a memory mapping (rather than a
// copy in memory).
func (m *Mapping) Mapped() bool { return m.mapped }

// Name returns the name of the file mapped.
func (m *Mapping) Name() string { return m.name }

// Advice is a hint for Advise.
type Advice int

// The hints Advise takes.
const (
	// AdviceRandom: reads will come in no order; read no more than each
	// page asked for (MADV_RANDOM).
	AdviceRandom Advice = iota + 1
	// AdviceSequential: reads will come in order; read ahead
	// (MADV_SEQUENTIAL).
	AdviceSequential
	// AdviceWillNeed: start reading the range now (MADV_WILLNEED).
	AdviceWillNeed
	// AdvicePopulate: read the range now and map its pages, so that the
	// reads that follow take no page fault (MADV_POPULATE_READ, Linux
	// 5.14 and later, after AdviceWillNeed; AdviceWillNeed alone where
	// the kernel has none). A page the disk fails to read is left to
	// fault, as without the hint. The range is read ahead in large
	// requests even under AdviceRandom, which would otherwise have it
	// read a page at a time.
	AdvicePopulate
	// AdviceDontNeed: the range will not be read again soon; take its
	// pages out of the process's resident memory (MADV_DONTNEED). The
	// mapping is shared and read-only, so nothing is lost: the pages
	// stay in the page cache, and a later read maps them again with a
	// minor fault. A walk of a whole image (a checkpoint's) uses it
	// behind itself, so that its resident memory does not grow by the
	// image's size.
	AdviceDontNeed
)

// Advise tells the kernel how the bytes [off, off+n) of the view will be
// read. It is a hint: on a copy, or where the kernel refuses it, it does
// nothing.
func (m *Mapping) Advise(off, n int64, a Advice) {
	if !m.mapped || off < 0 || n <= 0 || off >= int64(len(m.b)) {
		return
	}
	// madvise wants a page-aligned start.
	pg := int64(os.Getpagesize())
	start := off / pg * pg
	end := min(off+n, int64(len(m.b)))
	var how int
	switch a {
	case AdviceRandom:
		how = unix.MADV_RANDOM
	case AdviceSequential:
		how = unix.MADV_SEQUENTIAL
	case AdviceWillNeed:
		how = unix.MADV_WILLNEED
	case AdviceDontNeed:
		// Only whole pages: the first page, when off is within it, is
		// left alone, and so is a last page cut short by end.
		start = (off + pg - 1) / pg * pg
		end = end / pg * pg
		if end <= start {
			return
		}
		how = unix.MADV_DONTNEED
	case AdvicePopulate:
		// WILLNEED first: it reads the range ahead whatever the
		// mapping's advice, where POPULATE_READ on a mapping advised
		// MADV_RANDOM faults its pages in one read each: 1.2 MB
		// populated from a cold cache took 25 ms that way, 1.1 ms
		// after WILLNEED (an image's block index, FORMAT.md).
		_ = unix.Madvise(m.b[start:end], unix.MADV_WILLNEED)
		if madvPopulateRead >= 0 {
			_ = unix.Madvise(m.b[start:end], madvPopulateRead)
		}
		return
	default:
		return
	}
	_ = unix.Madvise(m.b[start:end], how)
}

// Close releases the view: it unmaps a mapping. No slice of Bytes may be
// read after Close: the address may no longer be mapped, or map
// something else.
func (m *Mapping) Close() error {
	b := m.b
	m.b = nil
	if !m.mapped || b == nil {
		return nil
	}
	m.mapped = false
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		return &os.PathError{Op: "munmap", Path: m.name, Err: err}
	}
	return nil
}

// FaultError is a fault on a mapped file turned into an error by
// CatchFault: the file and the offset of the byte whose read faulted. It
// matches ErrMapFault.
type FaultError struct {
	File   string
	Offset int64
}

// Error implements error.
func (e *FaultError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d (an I/O error, or the file was cut short under its mapping)", ErrMapFault, e.File, e.Offset)
}

// Is makes a FaultError match ErrMapFault.
func (e *FaultError) Is(target error) bool { return target == ErrMapFault }

// CatchFault turns a fault reading m into an error: a function that
// reads m's bytes defers it, with a pointer to its error result, after
// making the goroutine panic on faults rather than crash:
//
//	func read(m *vfs.Mapping) (err error) {
//		defer m.CatchFault(&err)
//		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
//		... read m.Bytes() ...
//	}
//
// A fault at an address in m becomes a *FaultError in *err; any other
// panic goes on as it was.
func (m *Mapping) CatchFault(err *error) {
	r := recover()
	if r == nil {
		return
	}
	f, ok := r.(interface{ Addr() uintptr })
	if !ok || !m.mapped || len(m.b) == 0 {
		panic(r)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.b)))
	addr := f.Addr()
	if addr < base || addr-base >= uintptr(len(m.b)) {
		panic(r)
	}
	*err = &FaultError{File: m.name, Offset: int64(addr - base)}
}

// mapFile is MapFile on the OS: the descriptor openRegular checks, whose
// fstat gives the size, mapped and closed.
func (osFS) mapFile(name string) (*Mapping, error) {
	var st unix.Stat_t
	fd, err := openRegularFD(name, unix.O_RDONLY, &st)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	m := &Mapping{name: name}
	if st.Size == 0 {
		return m, nil
	}
	if st.Size != int64(int(st.Size)) {
		return nil, &os.PathError{Op: "mmap", Path: name, Err: fmt.Errorf("size %d out of range", st.Size)}
	}
	b, err := mmapFD(fd, name, int(st.Size))
	if err != nil {
		return nil, err
	}
	m.b, m.mapped = b, true
	return m, nil
}

// mmap maps the first size bytes of the file, shared and read-only.
func (f *osFile) mmap(size int) ([]byte, error) { return mmapFD(int(f.f.Fd()), f.f.Name(), size) }

// mmapFD maps the first size bytes of descriptor fd, the file name,
// shared and read-only.
func mmapFD(fd int, name string, size int) ([]byte, error) {
	// MmapPtr, not Mmap, which also records the mapping in a map of
	// its own behind a mutex: this package keeps its mappings itself.
	p, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: name, Err: err}
	}
	return unsafe.Slice((*byte)(p), size), nil
}
