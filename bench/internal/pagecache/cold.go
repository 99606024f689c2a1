package pagecache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// How a cold open empties the page cache: the methods Method resolves.
const (
	// Drop writes back every dirty page of the machine (sync(2)) and
	// drops the whole page cache (echo 3 > /proc/sys/vm/drop_caches): the
	// state after a reboot, for every engine alike. It needs root.
	Drop = "drop"
	// Fadvise fdatasyncs each of the store's files and drops it from
	// the page cache with posix_fadvise(DONTNEED): the store's own files
	// only, which leaves the machine's other caches (directories, inodes)
	// warm.
	Fadvise = "fadvise"
)

const dropCaches = "/proc/sys/vm/drop_caches"

// Method resolves a -cold flag. "auto" is drop when this process
// may write drop_caches (it tries, which empties the page cache once),
// and fadvise otherwise, with a note saying why, which the report prints.
func Method(flag string) (method, note string, err error) {
	switch flag {
	case Drop, Fadvise:
		if flag == Drop {
			if err := dropPageCache(); err != nil {
				return "", "", fmt.Errorf("-cold drop: %w", err)
			}
		}
		return flag, "", nil
	case "auto":
		if err := dropPageCache(); err != nil {
			return Fadvise, fmt.Sprintf("cold opens use posix_fadvise(DONTNEED) on the store's files, not drop_caches: %v", err), nil
		}
		return Drop, "", nil
	}
	return "", "", fmt.Errorf("-cold %q: want drop, fadvise or auto", flag)
}

// dropPageCache writes every dirty page back and drops the page cache,
// dentries and inodes of the whole machine.
func dropPageCache() error {
	// Dirty pages are not dropped: write them back first.
	unix.Sync()
	f, err := os.OpenFile(dropCaches, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("3\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dropCaches, err)
	}
	return nil
}

// Make empties the page cache of the store in dir by method (Drop or
// Fadvise). After a drop it reads this program's own executable back, so
// that a cold open pays for the store's files and not for paging in the
// benchmark's code (which holds every engine).
func Make(method, dir string) error {
	switch method {
	case Drop:
		if err := dropPageCache(); err != nil {
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		return readAll(exe)
	case Fadvise:
		return evict(dir)
	}
	return errors.New("no cold method given")
}

// evict syncs every file under dir and drops it from the page cache, so
// that the open that follows reads from the disk. It touches only these
// files, not the machine's other jobs.
func evict(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// Dirty pages are not dropped: write them back first.
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("fdatasync %s: %w", p, err)
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}

// Label says in words how cold opens were made, for the report.
func Label(method string) string {
	switch method {
	case Drop:
		return "the whole page cache dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`) right before the open, in the process that opens, which then reads its own executable back"
	case Fadvise:
		return "the store's own files fdatasynced and dropped from the page cache (`posix_fadvise(DONTNEED)`) right before the open; drop_caches was not used"
	}
	return "unknown (" + method + ")"
}

// Warm reads every file under each path (a file or a directory) once,
// so that the page cache holds them: the warm state, after a cold step
// may have dropped them.
func Warm(paths ...string) error {
	for _, p := range paths {
		err := filepath.WalkDir(p, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			return readAll(p)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func readAll(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}
