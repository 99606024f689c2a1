// Package mem asks the kernel to back fresh memory before it is used.
//
// The first write to a page new to the process traps into the kernel,
// a fault that costs far more than the write, and a copy into much new
// memory pays it once a page. One madvise(MADV_POPULATE_WRITE) over the
// range first maps every page in a single system call, and the copy then
// runs at the speed of memory the process already has, less what a
// hypervisor takes to back the pages, which nothing in the guest avoids
// (bench/RESULTS.md has the figures). A recovery that loads a large
// snapshot or log spends much of its time there. The madvise is
// Linux's (mem_linux.go); elsewhere Populate does nothing (mem_other.go).
//
// It also has Prefetch, which starts a cache miss without waiting for it,
// for lookups in tables far bigger than the cache.
package mem
