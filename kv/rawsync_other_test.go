//go:build !linux

package kv_test

import (
	"errors"

	"golang.org/x/sys/unix"
)

// The portable twins of rawsync_linux_test.go, as vfs/os_other.go makes
// the same calls: fsync for fdatasync, and no fallocate (the yardsticks
// that reserve space then fail; the figures are Linux's).

func rawDatasync(fd int) error { return unix.Fsync(fd) }

func rawFallocate(fd int, off, n int64) error { return errors.ErrUnsupported }
