package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// How a cold open empties the page cache, as kvbench's (cmd/kvbench/cold.go).
const (
	// coldDrop writes back every dirty page of the machine (sync(2)) and
	// drops the whole page cache (echo 3 > /proc/sys/vm/drop_caches): the
	// state after a reboot, for every engine alike. It needs root.
	coldDrop = "drop"
	// coldFadvise fdatasyncs each of the store's files and drops it from
	// the page cache with posix_fadvise(DONTNEED): the store's own files
	// only.
	coldFadvise = "fadvise"
)

const dropCaches = "/proc/sys/vm/drop_caches"

// coldMethod resolves the -cold flag. "auto" is drop when this process
// may write drop_caches (it tries, which empties the page cache once),
// and fadvise otherwise, with a note saying why, which the report prints.
func coldMethod(flag string) (method, note string, err error) {
	switch flag {
	case coldDrop, coldFadvise:
		if flag == coldDrop {
			if err := dropPageCache(); err != nil {
				return "", "", fmt.Errorf("-cold drop: %w", err)
			}
		}
		return flag, "", nil
	case "auto":
		if err := dropPageCache(); err != nil {
			return coldFadvise, fmt.Sprintf("drop_caches refused: %v", err), nil
		}
		return coldDrop, "", nil
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

// makeCold empties the page cache of the store in dir by method. After a
// drop it reads this program's own executable back, so that a cold open
// pays for the store's files and not for paging in the benchmark's code.
func makeCold(method, dir string) error {
	switch method {
	case coldDrop:
		if err := dropPageCache(); err != nil {
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		return readAll(exe)
	case coldFadvise:
		return evict(dir)
	}
	return errors.New("no cold method in the task")
}

// evict syncs every file under dir and drops it from the page cache.
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

// warm reads every file under each path (a file or a directory) once,
// so that the page cache holds them: the warm state, after a cold step
// may have dropped them.
func warm(paths ...string) error {
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

// coldLabel says in words how cold opens were made, for the report.
func coldLabel(method string) string {
	switch method {
	case coldDrop:
		return "the whole page cache dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`) right before the open, in the process that opens, which then reads its own executable back"
	case coldFadvise:
		return "the store's own files fdatasynced and dropped from the page cache (`posix_fadvise(DONTNEED)`) right before the open; drop_caches was not used"
	}
	return "unknown (" + method + ")"
}
