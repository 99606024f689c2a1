package image

import (
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/vfs"
)

// TestOpenColdReadsFewPages opens an image whose pages are out of the
// page cache and counts the pages the open brought in: the few it reads
// (the first page, the footer, the page checksum table, the leases), not
// the kernel's read-around of the first one it touches, a read-ahead
// window (128 KiB on most disks, 8 MiB on the bench machine's), which
// the mapping's advice must forbid before any byte of it is read.
func TestOpenColdReadsFewPages(t *testing.T) {
	c := makeContent(60_000, func(int) int { return 100 }, false)
	name := osFile(t, c.encode(t))
	// drop syncs the file and drops its pages from the page cache: clean
	// pages that no mapping maps, DONTNEED drops.
	drop := func() {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		must(t, err)
		defer f.Close()
		must(t, f.Sync())
		must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	}

	for _, open := range []struct {
		name string
		open func() (*Reader, error)
	}{
		{"Open", func() (*Reader, error) { return Open(vfs.OS, name) }},
		{"OpenAny", func() (*Reader, error) { return OpenAny(vfs.OS, name, nil, nil, nil) }},
	} {
		t.Run(open.name, func(t *testing.T) {
			drop()
			r, err := open.open()
			must(t, err)
			defer r.Close()
			b := r.m.Bytes()
			// One byte a page of the OS's size, which need not be the
			// image's.
			pg := os.Getpagesize()
			vec := make([]byte, (len(b)+pg-1)/pg)
			if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
				t.Fatalf("mincore: %v", e)
			}
			resident := 0
			for _, v := range vec {
				resident += int(v & 1)
			}
			if resident == len(vec) {
				t.Skip("every page resident after FADV_DONTNEED: this file system keeps its pages (tmpfs?)")
			}
			t.Logf("%d of %d pages resident after the open", resident, len(vec))
			if resident > 8 {
				t.Errorf("the open brought %d of the image's %d pages into the page cache, want 8 at most", resident, len(vec))
			}
		})
	}
}

// TestColdReadsAhead: on a cold cache, the first lookup has the kernel
// read the whole hash index (so that later lookups read one page each,
// not two), and a walk has it read the blocks ahead of itself (so that a
// scan reads in large requests, not a page a fault on a mapping advised
// random); the open alone still reads a few pages (above).
func TestColdReadsAhead(t *testing.T) {
	c := makeContent(60_000, func(int) int { return 100 }, false)
	name := osFile(t, c.encode(t))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	drop := func() {
		must(t, f.Sync())
		must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	}
	resident := func(r *Reader, from, to uint64) (n int) {
		b := r.m.Bytes()[from:to]
		vec := make([]byte, (len(b)+PageSize-1)/PageSize)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatalf("mincore: %v", e)
		}
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	// eventually waits up to 2 s for the background reads.
	eventually := func(ok func() bool) bool {
		for range 200 {
			if ok() {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}

	drop()
	r, err := Open(vfs.OS, name)
	must(t, err)
	defer r.Close()
	hashEnd := r.hashOff + r.hashPages*PageSize
	if n := resident(r, r.hashOff, hashEnd); n == int(r.hashPages) {
		t.Skip("every hash page resident after FADV_DONTNEED: this file system keeps its pages (tmpfs?)")
	}
	if _, ok, err := r.Get(c.entries[7].Key); err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if !eventually(func() bool { return resident(r, r.hashOff, hashEnd) == int(r.hashPages) }) {
		t.Errorf("%d of %d hash pages resident after the first lookup, want all", resident(r, r.hashOff, hashEnd), r.hashPages)
	}

	drop()
	data := uint64(1+r.dataPages) * PageSize
	for e, err := range r.All(nil, nil) {
		must(t, err)
		_ = e
		break // one block read: the walk asks for the next 2 MiB
	}
	want := int(min(readAhead, data-PageSize) / PageSize)
	if !eventually(func() bool { return resident(r, PageSize, data) >= want }) {
		t.Errorf("%d data pages resident after a walk read its first block, want the %d it reads ahead", resident(r, PageSize, data), want)
	}
}
