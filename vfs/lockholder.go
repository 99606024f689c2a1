package vfs

import (
	"bytes"
	"strconv"
)

// NamesLockHolders reports whether fsys can name the process holding a
// lock that FS.Lock took, from the operating system's own table of
// locks: the host's file system on Linux, whose /proc/locks lists every
// flock with its holder's pid. Where it cannot, a holder that wants to be
// named writes its pid where a waiter reads it (the store's LOCK).
func NamesLockHolders(fsys FS) bool {
	_, ok := fsys.(osFS)
	return ok && lockTable
}

// LockHolder returns the pid of a process that holds a lock FS.Lock took
// on the file name, as the operating system's table of locks shows it
// (see NamesLockHolders), or 0 when it cannot tell: fsys has no such
// table, the table does not read, nothing holds the lock any more, or
// the holder is in a pid namespace the caller cannot see.
func LockHolder(fsys FS, name string) int {
	if !NamesLockHolders(fsys) {
		return 0
	}
	return lockHolder(name)
}

// flockHolder returns the pid of a holder of a flock on the file (dev
// major:minor, inode ino) in table, the text of /proc/locks, or 0. A
// line reads "ID: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INO START END"
// (major and minor in hex, the inode in decimal); a waiter's has "->"
// after the ID, and names no holder. The device the table names is the
// file system's, which on some (btrfs subvolumes) is not the one stat
// reports: a line of the inode on another device is taken when no line
// names the device as well and every such line names the same pid.
func flockHolder(table []byte, major, minor uint32, ino uint64) int {
	exact, other := 0, 0
	otherAgree := true
	for line := range bytes.Lines(table) {
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[1]) != "FLOCK" {
			continue // a waiter ("->"), another kind of lock, or a line cut short
		}
		pid, err := strconv.Atoi(string(f[4]))
		if err != nil || pid <= 0 {
			continue
		}
		id := bytes.Split(f[5], []byte(":"))
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(string(id[0]), 16, 32)
		lmin, err2 := strconv.ParseUint(string(id[1]), 16, 32)
		lino, err3 := strconv.ParseUint(string(id[2]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || lino != ino {
			continue
		}
		if uint32(maj) == major && uint32(lmin) == minor {
			if exact == 0 {
				exact = pid
			}
			continue
		}
		if other != 0 && other != pid {
			otherAgree = false
		}
		other = pid
	}
	if exact != 0 {
		return exact
	}
	if otherAgree {
		return other
	}
	return 0
}
