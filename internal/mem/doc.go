// Package mem asks the kernel to back fresh memory before it is used.
//
// On the virtual machines kv is measured on, the first write to a page new
// to the process traps into the kernel, a fault that costs as much as
// writing 10 KB to a page already mapped: copying into 256 MiB of new
// memory runs at 230-350 MB/s. One madvise(MADV_POPULATE_WRITE) over the
// range first maps every page in a single system call, and the copy then
// runs at about 500 MB/s (what is left is the hypervisor backing the
// pages, which nothing in the guest avoids). A recovery that loads a
// large snapshot or log spends much of its time there. The madvise is
// Linux's (mem_linux.go); elsewhere Populate does nothing (mem_other.go).
//
// It also has Prefetch, which starts a cache miss without waiting for it,
// for lookups in tables far bigger than the cache.
package mem
