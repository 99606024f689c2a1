package vfs_test

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/vfs"
)

// TestAdvisePopulate checks that AdvicePopulate on a mapping advised
// AdviceRandom (as an image is) leaves every page of its range, and no
// page of the rest, resident and mapped: a file whose pages were dropped
// from the page cache, populated in its middle.
func TestAdvisePopulate(t *testing.T) {
	const pages = 256
	pg := os.Getpagesize()
	name := filepath.Join(t.TempDir(), "f")
	data := make([]byte, pages*pg)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f, err := os.Create(name)
	must(t, err)
	_, err = f.Write(data)
	must(t, err)
	must(t, f.Sync())
	// Clean pages of a synced file: DONTNEED drops them.
	must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	must(t, f.Close())

	vf, err := vfs.OS.Open(name)
	must(t, err)
	m, err := vfs.Map(vf, int64(len(data)))
	must(t, err)
	must(t, vf.Close())
	defer m.Close()
	resident := func() []byte {
		vec := make([]byte, pages)
		b := m.Bytes()
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatalf("mincore: %v", e)
		}
		for i := range vec {
			vec[i] &= 1
		}
		return vec
	}
	before := resident()
	for i, r := range before {
		if r != 0 {
			t.Skipf("page %d still resident after FADV_DONTNEED: this file system keeps its pages (tmpfs?)", i)
		}
	}
	m.Advise(0, int64(len(data)), vfs.AdviceRandom)
	lo, hi := 64, 192
	m.Advise(int64(lo*pg), int64((hi-lo)*pg), vfs.AdvicePopulate)
	after := resident()
	for i := lo; i < hi; i++ {
		if after[i] == 0 {
			t.Fatalf("page %d of the populated range [%d, %d) is not resident", i, lo, hi)
		}
	}
	for i := range pages {
		if (i < lo || i >= hi) && after[i] != before[i] {
			t.Errorf("page %d outside the range [%d, %d): resident %d, before the hint %d", i, lo, hi, after[i], before[i])
		}
	}
	if string(m.Bytes()) != string(data) {
		t.Errorf("the mapping differs from the file")
	}
}
