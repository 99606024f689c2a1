package kv_test

import "golang.org/x/sys/unix"

// The yardsticks' system calls (bench_test.go), as the store's vfs makes
// them on Linux; rawsync_other_test.go has their portable twins.

func rawDatasync(fd int) error { return unix.Fdatasync(fd) }

func rawFallocate(fd int, off, n int64) error { return unix.Fallocate(fd, 0, off, n) }
