package mem_test

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/internal/mem"
)

// resident returns how many of b's pages are in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestPopulate checks that Populate maps every whole page of fresh memory
// and changes none of its bytes. The memory comes from mmap, not the Go
// heap, so that none of it is mapped before.
func TestPopulate(t *testing.T) {
	const size = 1 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	if n := resident(t, b); n != 0 {
		t.Fatalf("%d pages resident before Populate, want 0", n)
	}
	b[0] = 7 // one page mapped and written: Populate must keep the byte
	// Half a page in at each end: only the whole pages between are asked for.
	mem.Populate(b[2048 : size-2048 : size-2048])
	n := resident(t, b) // before reading b, which maps the pages it reads
	if n == 1 {
		t.Skip("the kernel does not support MADV_POPULATE_WRITE")
	}
	// Page 0 was written; pages 1 to 254 are whole in the range; the
	// last page is only half in it.
	if want := size/4096 - 1; n != want {
		t.Fatalf("%d pages resident after Populate, want %d", n, want)
	}
	if bytes.Count(b, []byte{0}) != size-1 || b[0] != 7 {
		t.Fatal("Populate changed bytes")
	}
	small, err := unix.Mmap(-1, 0, mem.MinPopulate-4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(small)
	mem.Populate(small) // too small: left to fault
	if n := resident(t, small); n != 0 {
		t.Fatalf("Populate mapped %d pages of an allocation smaller than MinPopulate", n)
	}
}
