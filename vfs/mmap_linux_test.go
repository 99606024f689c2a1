package vfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestAdviseDontNeed checks that AdviceDontNeed takes the whole pages of
// its range out of the process's resident memory (the mapping's Rss in
// /proc/self/smaps), leaves a page it covers in part, and loses no byte:
// the range reads back the same.
func TestAdviseDontNeed(t *testing.T) {
	const pages = 256
	pg := os.Getpagesize()
	name := filepath.Join(t.TempDir(), "f")
	data := make([]byte, pages*pg)
	for i := range data {
		data[i] = byte(i * 13)
	}
	must(t, os.WriteFile(name, data, 0o600))
	vf, err := vfs.OS.Open(name)
	must(t, err)
	m, err := vfs.Map(vf, int64(len(data)))
	must(t, err)
	must(t, vf.Close())
	defer m.Close()
	b := m.Bytes()
	var sum byte
	touch := func() {
		for i := 0; i < len(b); i += pg {
			sum += b[i]
		}
	}
	rss := func() int {
		t.Helper()
		smaps, err := os.ReadFile("/proc/self/smaps")
		if err != nil {
			t.Skipf("no /proc/self/smaps: %v", err)
		}
		start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		in := false
		for _, line := range strings.Split(string(smaps), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
				in = strings.HasPrefix(f[0], start)
				continue
			}
			if in && strings.HasPrefix(line, "Rss:") {
				var kb int
				fmt.Sscanf(strings.TrimPrefix(line, "Rss:"), "%d", &kb)
				return kb * 1024 / pg
			}
		}
		t.Fatalf("no mapping at %s in /proc/self/smaps", start)
		return 0
	}
	touch()
	if got := rss(); got != pages {
		t.Skipf("%d of %d pages resident after reading each (sum %d): cannot tell what the hint drops", got, pages, sum)
	}
	// From the middle of page 10 to the middle of page 200: pages 11 to
	// 199 go, 10 and 200 stay.
	m.Advise(int64(10*pg+pg/2), int64(190*pg), vfs.AdviceDontNeed)
	if got, want := rss(), pages-189; got != want {
		t.Errorf("%d pages resident after the hint, want %d", got, want)
	}
	if string(b) != string(data) {
		t.Errorf("the mapping differs from the file after the hint")
	}
	if got := rss(); got != pages {
		t.Errorf("%d pages resident after reading the mapping again, want all %d", got, pages)
	}
}
