package lockfile

import (
	"fmt"
	"path"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// TestPIDLine checks the pid line an open writes into LOCK against the
// format it replaced: ten columns, left-aligned, then a newline.
func TestPIDLine(t *testing.T) {
	for _, pid := range []int{0, 1, 42, 99999, 4194304, 999999999, 1234567890, 12345678901} {
		if got, want := string(PIDLine(pid)), fmt.Sprintf("%-10d\n", pid); got != want {
			t.Errorf("PIDLine(%d) = %q, want %q", pid, got, want)
		}
	}
}

// TestHolderFromFile reads the holder back from the line, on a file
// system whose OS names no holder (the in-memory one), and names no one
// for a LOCK that holds no pid or is missing.
func TestHolderFromFile(t *testing.T) {
	fsys := vfs.NewMem()
	name := path.Join("/d", "LOCK")
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Holder(fsys, name); got != 0 {
		t.Errorf("a missing LOCK names %d, want 0", got)
	}
	for _, c := range []struct {
		content string
		want    int
	}{{string(PIDLine(4321)), 4321}, {"", 0}, {"not a pid\n", 0}} {
		fsys.Remove(name) // Create makes a new file only
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(c.content), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := Holder(fsys, name); got != c.want {
			t.Errorf("LOCK holding %q names %d, want %d", c.content, got, c.want)
		}
	}
}
