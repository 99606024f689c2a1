//go:build !linux

package filelock

import (
	"errors"
	"os"
)

// kernelLocks is false here: this build keeps no holder files, and every
// probe says "cannot tell", so that holders are judged by time
// (TimeOnly, or the fallback of WithStaleAfter).
const kernelLocks = false

var errNoKernelLocks = errors.New("filelock: holder files are supported on Linux only")

func createHolderFile(dir, base string, content []byte) (*os.File, error) {
	return nil, errNoKernelLocks
}

func probeHolderFile(path string) (verdict, string) {
	return unknown, "cannot tell on this platform"
}

func takeHolderFile(path string) (*os.File, bool) { return nil, false }

func selfStart() uint64 { return 0 }

func pidNamespace() uint64 { return 0 }

func procNamespace(own uint64) uint64 { return 0 }

func dirID(dir string) (dev, ino uint64) { return 0, 0 }

func probePID(pid int, start uint64) (verdict, string) {
	return unknown, "cannot tell on this platform"
}

func bootID() string { return "" }

func checkLocalFS(dir string) error { return nil }
