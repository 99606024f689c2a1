package main

import (
	"os"

	"strconv"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// canMountTmpfs reports, once, whether this process may mount a tmpfs (it
// runs as root with CAP_SYS_ADMIN): the [tmpfs] condition of the scripts
// that need a small, really full file system.
var canMountTmpfs = sync.OnceValue(func() bool {
	dir, err := os.MkdirTemp("", "kv-tmpfs-probe")
	if err != nil {
		return false
	}
	defer os.Remove(dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		return false
	}
	return unix.Unmount(dir, 0) == nil
})

func init() {
	scriptConditions["tmpfs"] = canMountTmpfs
	// tmpfs DIR SIZE: mount a tmpfs of SIZE bytes (64KiB, 2MiB, ...) on
	// DIR, made if missing; unmounted when the script ends.
	scriptCmds["tmpfs"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 || neg {
			ts.Fatalf("usage: tmpfs DIR SIZE")
		}
		size, err := parseSize("tmpfs", args[1])
		ts.Check(err)
		dir := ts.MkAbs(args[0])
		ts.Check(os.MkdirAll(dir, 0o755))
		ts.Check(unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)))
		ts.Defer(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	}
}
