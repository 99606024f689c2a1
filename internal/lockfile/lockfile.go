package lockfile

import (
	"strconv"
	"strings"

	"github.com/kvstore/kv/vfs"
)

// PIDLine is what an open writes into LOCK where the operating system
// does not name the holder: pid, left-aligned in ten columns padded with
// spaces, and a newline (fmt's "%-10d\n", without fmt's printer on the
// path of every open). Its width is fixed, so that it overwrites the
// line an earlier open wrote, in place.
func PIDLine(pid int) []byte {
	b := strconv.AppendInt(make([]byte, 0, 11), int64(pid), 10)
	for len(b) < 10 {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// Holder names the process that holds the lock on name, a LOCK file, for
// an error message: from the operating system's table of locks where it
// has one (vfs.NamesLockHolders), else from the pid the holder wrote; 0
// when neither tells. Ask it only after an attempt to take the lock
// failed with vfs.ErrLocked: where the pid is read from the file, a lock
// that no one holds still shows the last writer's.
func Holder(fsys vfs.FS, name string) int {
	if vfs.NamesLockHolders(fsys) {
		return vfs.LockHolder(fsys, name)
	}
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
