package vfs

import (
	"bytes"
	"strconv"
	"testing"
)

// TestFlockHolder reads holders out of /proc/locks texts: only a FLOCK
// line of the file's inode names one, on the file's device first.
func TestFlockHolder(t *testing.T) {
	const (
		maj, min = 0xfe, 0x01
		ino      = 9978330
	)
	for _, c := range []struct {
		name, table string
		want        int
	}{
		{"empty", "", 0},
		{"holder", "1: FLOCK  ADVISORY  WRITE 28861 fe:01:9978330 0 EOF\n", 28861},
		{"shared holders, the first", "1: FLOCK  ADVISORY  READ 10 fe:01:9978330 0 EOF\n2: FLOCK  ADVISORY  READ 11 fe:01:9978330 0 EOF\n", 10},
		{"no newline at the end", "1: FLOCK  ADVISORY  WRITE 28861 fe:01:9978330 0 EOF", 28861},
		{"a waiter names no holder", "1: -> FLOCK  ADVISORY  WRITE 77 fe:01:9978330 0 EOF\n", 0},
		{"waiter then holder", "1: FLOCK  ADVISORY  WRITE 5 fe:01:9978330 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 77 fe:01:9978330 0 EOF\n", 5},
		{"a POSIX lock is not the store's", "1: POSIX  ADVISORY  WRITE 99 fe:01:9978330 0 EOF\n", 0},
		{"another inode", "1: FLOCK  ADVISORY  WRITE 99 fe:01:9978331 0 EOF\n", 0},
		{"the device first", "1: FLOCK  ADVISORY  WRITE 3 00:2d:9978330 0 EOF\n2: FLOCK  ADVISORY  WRITE 4 fe:01:9978330 0 EOF\n", 4},
		{"the inode on another device, alone", "1: FLOCK  ADVISORY  WRITE 3 00:2d:9978330 0 EOF\n", 3},
		{"the inode on devices that disagree", "1: FLOCK  ADVISORY  WRITE 3 00:2d:9978330 0 EOF\n2: FLOCK  ADVISORY  WRITE 4 00:2e:9978330 0 EOF\n", 0},
		{"pid hidden by a namespace", "1: FLOCK  ADVISORY  WRITE 0 fe:01:9978330 0 EOF\n", 0},
		{"cut short", "1: FLOCK  ADVISORY  WRITE 28861\n", 0},
		{"garbage", "x: FLOCK a b c d:e:f\n: FLOCK\n\n", 0},
		{"no inode", "1: FLOCK  ADVISORY  WRITE 5 <none>:0 0 EOF\n", 0},
	} {
		if got := flockHolder([]byte(c.table), maj, min, ino); got != c.want {
			t.Errorf("%s: flockHolder = %d, want %d", c.name, got, c.want)
		}
	}
}

// FuzzFlockHolder: no text of /proc/locks makes the parser panic, and a
// pid it names is one the text holds on a FLOCK line.
func FuzzFlockHolder(f *testing.F) {
	f.Add([]byte("1: FLOCK  ADVISORY  WRITE 28861 fe:01:9978330 0 EOF\n"), uint64(9978330))
	f.Add([]byte("1: -> FLOCK  ADVISORY  WRITE 77 fe:01:1 0 EOF\n2: POSIX  ADVISORY  READ 1 08:01:1 0 EOF\n"), uint64(1))
	f.Fuzz(func(t *testing.T, table []byte, ino uint64) {
		pid := flockHolder(table, 0xfe, 0x01, ino)
		if pid == 0 {
			return
		}
		if pid < 0 || !bytes.Contains(table, []byte("FLOCK")) || !bytes.Contains(table, []byte(strconv.Itoa(pid))) {
			t.Fatalf("pid %d from a text that names no such flock holder: %q", pid, table)
		}
	})
}
