package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// vouch makes the bytes [from, to) of segment file durable for a
// read-only recovery that no live writer competes with (Options.LockShared),
// and returns the offset up to which it vouches for them: to when it
// could, from (or where the disk's bytes first differ) when it could
// not, with the reason in res.UnvouchedWhy.
//
// The bytes are a crashed or killed writer's last records, past the last
// offset its records claim synced: in the page cache, and perhaps not on
// disk. An fdatasync of the file makes them durable, and an fsync of the
// directory the file's name (a segment the writer created just before it
// died); neither changes a byte. The fdatasync is not proof alone: pages
// whose write-back failed before (an fdatasync that returned EIO to the
// writer, which then acknowledged nothing) are clean in the cache but
// not on disk, and a later fdatasync returns success without writing
// them. So the range is read again past the cache and must match what
// the cache holds; where the file system cannot read past its cache
// (tmpfs, another OS), the fdatasync's success is taken as proof.
func vouch(fsys vfs.FS, dir, file string, from, to int64, dirSynced *bool, res *Result) int64 {
	fail := func(format string, a ...any) int64 {
		if res.UnvouchedWhy == "" {
			res.UnvouchedWhy = fmt.Sprintf(format, a...)
		}
		return from
	}
	f, err := fsys.Open(file)
	if err != nil {
		return fail("open %s to sync it: %v", file, err)
	}
	defer f.Close()
	// The fdatasync of a file this recovery only reads: it makes what
	// the dead writer left in the page cache durable, writing no byte.
	if err := f.Sync(); err != nil {
		return fail("fdatasync %s: %v", file, err)
	}
	if !*dirSynced {
		// The segment's name, which its writer may have created without
		// a directory fsync yet: the records are durable only with it.
		if err := vfs.SyncDir(fsys, dir); err != nil {
			return fail("fsync %s: %v", dir, err)
		}
		*dirSynced = true
	}
	cached := make([]byte, to-from)
	if n, err := f.ReadAt(cached, from); int64(n) != to-from {
		return fail("read %s at %d: %d bytes, %v", file, from, n, err)
	}
	disk := make([]byte, to-from)
	n, err := vfs.ReadDurableAt(fsys, file, disk, from)
	switch {
	case vfs.IsNotSupported(err):
		return to
	case err != nil && err != io.EOF:
		return fail("read %s past the page cache: %v", file, err)
	}
	if i := mismatch(cached, disk[:n]); i >= 0 {
		// The records that end before the first difference are on disk.
		fail("%s differs at offset %d between the page cache and the disk after an fdatasync: a write-back of it failed earlier", file, from+int64(i))
		return from + int64(i)
	}
	return to
}

// mismatch returns the first index where a and b differ, or where the
// shorter ends, or -1 when they are equal.
func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// VouchTail vouches, as a read-only Recover with Options.LockShared does,
// for the records of the newest segments of dir past their synced
// claims, and returns, by segment, the offset up to which each is now
// durable (only the segments where that is past the claim). It calls
// lockShared (which must take the directory's lock shared, so that no
// writer is live) only when there is something to vouch for, and lets
// the lock go before it returns. It changes no byte; what it cannot vouch
// for it leaves out (why is the second result; empty beside a live
// writer, whose records are its own to mark).
func VouchTail(fsys vfs.FS, dir string, maxRecordSize int, lockShared func() (func(), error)) (map[wal.SegmentNum]int64, string) {
	segs, err := wal.ListSegments(fsys, dir)
	if err != nil || len(segs) == 0 {
		return nil, ""
	}
	rd := &wal.Reader{FS: fsys, Dir: dir, MaxRecordSize: maxRecordSize}
	out := map[wal.SegmentNum]int64{}
	res := &Result{}
	dirSynced, locked := false, false
	for i := max(0, len(segs)-2); i < len(segs); i++ {
		info, err := rd.Scan(segs[i], true, nil)
		if err != nil {
			return out, err.Error()
		}
		if (i < len(segs)-1 && info.Sealed) || info.DataEnd <= info.Synced {
			continue
		}
		if !locked {
			unlock, err := lockShared()
			if err != nil {
				if errors.Is(err, vfs.ErrLocked) {
					return out, ""
				}
				return out, fmt.Sprintf("LOCK could not be taken to tell whether a writer is live: %v", err)
			}
			defer unlock()
			locked = true
		}
		if v := vouch(fsys, dir, wal.SegmentPath(dir, segs[i]), info.Synced, info.DataEnd, &dirSynced, res); v > info.Synced {
			out[segs[i]] = v
		}
	}
	return out, res.UnvouchedWhy
}
