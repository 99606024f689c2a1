package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// An offline look at a backup: stat, check and verify take a backup FILE
// (or a snapshot copied out of a data directory) where they take DIR, as
// etcdutl snapshot status does.

// isFile reports whether name exists and is not a directory: a backup
// that stat, check and verify read in place of a data directory.
func isFile(name string) bool {
	fi, err := vfs.OS.Stat(name)
	return err == nil && !fi.IsDir()
}

// backupStat describes a backup file: its format version, the segment it
// covers (0 for a backup Store.Backup wrote), its size and the digest and
// key bytes of its map, every byte of it verified.
type backupStat struct {
	File    string
	Version uint16
	Covers  uint64
	Size    int64
	Bytes   int64
	Digest  kv.Digest
}

// statBackup reads and verifies the backup in file.
func statBackup(file string) (*backupStat, error) {
	st := &backupStat{File: file}
	fi, err := vfs.OS.Stat(file)
	if err != nil {
		return nil, err
	}
	st.Size = fi.Size()
	d, err := kv.ReadBackup(file, nil, func(e kv.Entry) error {
		st.Bytes += int64(len(e.Key) + len(e.Value))
		return nil
	})
	if err != nil {
		return nil, backupError(err)
	}
	st.Digest = d
	if meta, err := image.ReadAnyMeta(vfs.OS, file); err == nil {
		st.Covers = uint64(meta.Covered)
	}
	if b, err := vfs.ReadPrefix(vfs.OS, file, 8); err == nil && len(b) == 8 {
		st.Version = binary.LittleEndian.Uint16(b[6:])
	}
	return st, nil
}

// printBackupStat prints st as stat prints a directory: the file, then
// the map's line and what its hash covers.
func printBackupStat(w io.Writer, st *backupStat) {
	covers := "covers no segment (a backup)"
	if st.Covers > 0 {
		covers = fmt.Sprintf("covered log.%06d (a snapshot copied out of a data directory)", st.Covers)
	}
	fmt.Fprintf(w, "backup    %s  %d bytes  format version %d  %s  %d leases\n", st.File, st.Size, st.Version, covers, st.Digest.Leases)
	fmt.Fprintf(w, "map       %s  %d bytes  revision %d  hash %s\n", kvcli.Plural(int64(st.Digest.Keys), "key"), st.Bytes, st.Digest.Revision, st.Digest.Hash)
	fmt.Fprintln(w, hashCovers)
}

// backupStatJSON is stat --json of a backup file.
func backupStatJSON(st *backupStat) any {
	return struct {
		Backup   string `json:"backup"`
		Size     int64  `json:"size"`
		Version  uint16 `json:"version"`
		Covers   uint64 `json:"covers"`
		Keys     int64  `json:"keys"`
		Bytes    int64  `json:"bytes"`
		Leases   int64  `json:"leases"`
		Revision uint64 `json:"revision"`
		Hash     string `json:"hash"`
		Clean    bool   `json:"clean"`
	}{st.File, st.Size, st.Version, st.Covers, st.Digest.Keys, st.Bytes, st.Digest.Leases, uint64(st.Digest.Revision), st.Digest.Hash.String(), true}
}

// errStop ends a read of a backup early.
var errStop = errors.New("stop")

// compareBackupFiles compares the backups a and b key by key, as verify
// compares a store with a backup: every key's value, create and mod
// revisions and version, and the number of leases. It returns both
// digests, and a *kv.DiffError at the first key that differs, whose
// reason names the files.
func compareBackupFiles(a, b string) (da, db kv.Digest, err error) {
	var errB error
	next, stop := iter.Pull(func(yield func(kv.Entry) bool) {
		db, errB = kv.ReadBackup(b, nil, func(e kv.Entry) error {
			if !yield(e) {
				return errStop
			}
			return nil
		})
	})
	defer stop()
	var diff *kv.DiffError
	differ := func(key []byte, format string, args ...any) {
		if diff == nil {
			diff = &kv.DiffError{File: b, Key: append([]byte{}, key...), Reason: fmt.Sprintf(format, args...)}
		}
	}
	cur, more := next()
	da, err = kv.ReadBackup(a, nil, func(e kv.Entry) error {
		for more && string(cur.Key) < string(e.Key) {
			differ(cur.Key, "in %s, not in %s", b, a)
			cur, more = next()
		}
		switch {
		case !more || string(cur.Key) != string(e.Key):
			differ(e.Key, "in %s, not in %s", a, b)
			return nil
		case string(cur.Value) != string(e.Value):
			differ(e.Key, "value %s in %s, %s in %s", opmodel.Show(e.Value), a, opmodel.Show(cur.Value), b)
		case cur.CreateRev != e.CreateRev:
			differ(e.Key, "create revision %d in %s, %d in %s", e.CreateRev, a, cur.CreateRev, b)
		case cur.ModRev != e.ModRev:
			differ(e.Key, "mod revision %d in %s, %d in %s", e.ModRev, a, cur.ModRev, b)
		case cur.Version != e.Version:
			differ(e.Key, "version %d in %s, %d in %s", e.Version, a, cur.Version, b)
		}
		cur, more = next()
		return nil
	})
	if err != nil {
		return da, db, err
	}
	for ; more; cur, more = next() {
		differ(cur.Key, "in %s, not in %s", b, a)
	}
	stop()
	if errB != nil && !errors.Is(errB, errStop) {
		return da, db, errB
	}
	if diff == nil && da.Leases != db.Leases {
		diff = &kv.DiffError{File: b, Reason: fmt.Sprintf("%d leases in %s, %d in %s", da.Leases, a, db.Leases, b)}
	}
	if diff != nil {
		return da, db, diff
	}
	return da, db, nil
}
