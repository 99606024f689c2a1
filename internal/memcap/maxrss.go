package main

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSS is the peak resident memory wait4 reported for an exited
// process, in bytes: Linux and the BSDs give ru_maxrss in KiB, Darwin in
// bytes.
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
