package recovery

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// MarkerName is the file that says a directory is a kv data directory,
// and LockName the lock file's. Part of the on-disk format (FORMAT.md,
// "The data directory").
const (
	MarkerName = "KVSTORE"
	LockName   = "LOCK"
)

// markerMagic is the marker's first line, the same in every version, and
// markerVersion the version of the directory's layout rules this build
// writes and reads (version 1: a sealed segment is never the newest, see
// FORMAT.md, "Rotation"). Part of the on-disk format.
const (
	markerMagic   = "kv data directory\n"
	markerVersion = 1
)

// markerContent is the marker's bytes: the magic line, "version N", and
// "crc32c" with the CRC-32C of the two lines before it, in hex. Part of
// the on-disk format.
var markerContent = markerBytes(markerVersion)

// markerBytes returns the marker of version v.
func markerBytes(v int) string {
	head := fmt.Sprintf("%sversion %d\n", markerMagic, v)
	return fmt.Sprintf("%scrc32c %08x\n", head, crc32.Checksum([]byte(head), crc32.MakeTable(crc32.Castagnoli)))
}

// lostFound is the directory fsck keeps at the root of an ext2/3/4 file
// system: a data directory that is a mount point holds it.
const lostFound = "lost+found"

// ErrNotDataDir is matched by the error of Recover, Check, Salvage and
// kv.Open on a directory that holds files and is not a kv data directory:
// it has no marker (MarkerName), nor a segment or a snapshot that the
// store wrote (the directory of a store made before the marker existed).
// Nothing in it is read as data, changed, or created (no LOCK either).
// The error is a *NotDataDirError naming the directory.
var ErrNotDataDir = errors.New("not a kv data directory")

// ErrMarkerCorrupt is matched (through a *corrupt.Error naming the file
// and the first byte that differs) by the error of a marker that does not
// hold the marker's bytes: it is written whole and synced before it is
// renamed into place, so no crash damages one. It is corruption
// (IsCorrupt): Check reports it and PlanRepair writes the marker again,
// keeping the damaged one as evidence.
var ErrMarkerCorrupt = corrupt.New("recovery: damaged store marker")

// ErrMarkerVersion is matched (through a *corrupt.Error naming the file)
// by the error of a marker, intact, that names a directory layout version
// this build does not read. It is not corruption.
var ErrMarkerVersion = errors.New("recovery: unsupported data directory version")

// ErrNoStore is matched by the error of Recover with Options.NoCreate or
// ReadOnly, and of Check and Salvage, on a directory that does not exist
// or holds no store yet (it is empty, or holds only what a crash leaves
// of a store being created, before its first record): there is nothing
// to open, and creating a store was not asked for. Nothing is created.
// The error is a *NoStoreError naming the directory.
var ErrNoStore = errors.New("no kv store")

// NotDataDirError is the error of a directory that is not a kv data
// directory. It matches ErrNotDataDir.
type NotDataDirError struct {
	Dir string
	// Found lists a few of the names in the directory (at most 3), the
	// first ones in byte order.
	Found []string
	// More counts the names not in Found.
	More int
	// Reason says why, when it is not the plain absence of the store's
	// files (a marker that does not hold the marker's bytes).
	Reason string
}

// Error implements error.
func (e *NotDataDirError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "not a kv data directory: %s", e.Dir)
	if e.Reason != "" {
		fmt.Fprintf(&b, " (%s)", e.Reason)
		return b.String()
	}
	if len(e.Found) > 0 {
		b.WriteString(" (it holds ")
		for i, n := range e.Found {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", n)
		}
		if e.More > 0 {
			fmt.Fprintf(&b, " and %d more", e.More)
		}
		fmt.Fprintf(&b, "; a store holds %s, log.NNNNNN segments and a snapshot)", MarkerName)
	}
	return b.String()
}

// Unwrap returns ErrNotDataDir.
func (e *NotDataDirError) Unwrap() error { return ErrNotDataDir }

// NoStoreError is the error of a directory that holds no store when none
// may be created. It matches ErrNoStore.
type NoStoreError struct {
	Dir     string
	Missing bool // the directory does not exist (else it is empty)
	// Why says why none was created: "creating one was not asked for",
	// "a read-only open creates nothing".
	Why string
}

// Error implements error.
func (e *NoStoreError) Error() string {
	what := "the directory is empty"
	if e.Missing {
		what = "the directory does not exist"
	}
	if e.Why == "" {
		return fmt.Sprintf("no kv store in %s: %s", e.Dir, what)
	}
	return fmt.Sprintf("no kv store in %s: %s, and %s", e.Dir, what, e.Why)
}

// Unwrap returns ErrNoStore.
func (e *NoStoreError) Unwrap() error { return ErrNoStore }

// DirKind is what Identify finds in a directory.
type DirKind int

// The kinds of directory.
const (
	// DirMissing: the directory does not exist.
	DirMissing DirKind = iota + 1
	// DirEmpty: the directory holds no store: it is empty, or holds only
	// what a crash leaves of a store being created before its first
	// record (LOCK, log.000001 holding no record, KVSTORE.tmp, a
	// snapshot.tmp that starts as a snapshot does), or lost+found.
	// Recover creates a store in it, unless told not to.
	DirEmpty
	// DirMarked: the directory holds the marker: a store.
	DirMarked
	// DirUnmarked: no marker, but a segment or a snapshot that the store
	// wrote: a store made before the marker existed, or one whose
	// creation a crash cut short after its first segment. Recover adopts
	// it: a writable Recover adds the marker once it has recovered it.
	DirUnmarked
)

// String names the kind.
func (k DirKind) String() string {
	switch k {
	case DirMissing:
		return "missing"
	case DirEmpty:
		return "empty"
	case DirMarked:
		return "store"
	case DirUnmarked:
		return "store without marker"
	}
	return "unknown"
}

// HoldsStore reports whether the directory holds a store to open.
func (k DirKind) HoldsStore() bool { return k == DirMarked || k == DirUnmarked }

// Identify tells what dir is, reading only its listing, the marker and the
// first bytes of the files under a segment's or the snapshot's name. It
// changes nothing. A directory that holds files and is neither a store
// nor empty is an error matching ErrNotDataDir. A marker that does not
// hold the marker's bytes is an error matching ErrMarkerCorrupt (or
// ErrMarkerVersion), returned with DirMarked. In a directory without
// the marker, a directory under a store's name (log.000001, snapshot)
// makes it not a store (ErrNotDataDir); any other file under a store's
// name that is not a regular file (a symbolic link, a FIFO) fails as
// vfs.ErrNotRegular.
func Identify(fsys vfs.FS, dir string) (DirKind, error) {
	// Most directories asked about are stores: their marker says so
	// with one open and no listing (a listing was a sixth of a reopen's
	// time). A marker that is there but will not read is the answer the
	// listing would lead to as well (DirMarked, and its error); one that
	// is not there, or a path the open cannot enter, is asked the long
	// way.
	err := checkMarker(fsys, dir)
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, fs.ErrPermission) {
		return DirMarked, err
	}
	kind, _, err := identify(fsys, dir)
	return kind, err
}

// identify is Identify, which also returns the directory's listing (nil
// when it is missing), so that recovery need not list it again.
func identify(fsys vfs.FS, dir string) (DirKind, []string, error) {
	// The listing first: of a directory, the common case, it is all the
	// answer needs. A listing that fails for another reason than a
	// missing directory asks Stat whether dir is one, and fails.
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return DirMissing, nil, nil
	}
	if err != nil {
		if fi, serr := fsys.Stat(dir); serr == nil && !fi.IsDir() {
			return 0, nil, &NotDataDirError{Dir: dir, Reason: "not a directory"}
		}
		return 0, nil, err
	}
	kind, err := identifyNames(fsys, dir, names)
	return kind, names, err
}

// identifyNames is identify of a directory that lists names.
func identifyNames(fsys vfs.FS, dir string, names []string) (DirKind, error) {
	for _, n := range names {
		if n == MarkerName {
			return DirMarked, checkMarker(fsys, dir)
		}
	}
	var foreign []string
	for _, n := range names {
		file := path.Join(dir, n)
		if isStoreName(n) && isDir(fsys, file) {
			// A folder under a segment's or the snapshot's name is no
			// file a store wrote: the directory is someone else's (kv
			// run in the wrong place), not a store with a broken file.
			foreign = append(foreign, n)
			continue
		}
		if seg, ok := wal.ParseSegmentName(n); ok {
			kind, err := wal.Sniff(fsys, file, seg)
			if err != nil {
				return 0, err
			}
			switch {
			case kind == wal.SniffSegment:
				return DirUnmarked, nil
			case kind == wal.SniffUnwritten && seg == 1:
				continue // a first segment a crash cut short at creation
			}
			foreign = append(foreign, n)
			continue
		}
		switch n {
		case snapshot.Name:
			ok, err := snapshot.Sniff(fsys, file)
			if err != nil {
				return 0, err
			}
			if ok {
				return DirUnmarked, nil
			}
			foreign = append(foreign, n)
		case snapshot.TmpName:
			// Never trusted, removed by recovery: a store's if it starts
			// as a snapshot does (a restore or a checkpoint cut short).
			ok, err := snapshot.SniffPrefix(fsys, file)
			if err != nil {
				return 0, err
			}
			if !ok {
				foreign = append(foreign, n)
			}
		case LockName, MarkerName + ".tmp", lostFound:
		default:
			foreign = append(foreign, n)
		}
	}
	if len(foreign) == 0 {
		return DirEmpty, nil
	}
	e := &NotDataDirError{Dir: dir, Found: foreign[:min(len(foreign), 3)], More: max(0, len(foreign)-3)}
	return 0, e
}

// isStoreName reports whether n is the name of a file that identifyNames
// reads to tell a store: a segment's, the snapshot's or its tmp's.
func isStoreName(n string) bool {
	_, seg := wal.ParseSegmentName(n)
	return seg || n == snapshot.Name || n == snapshot.TmpName
}

// isDir reports whether name is a directory (or a link to one).
func isDir(fsys vfs.FS, name string) bool {
	fi, err := fsys.Stat(name)
	return err == nil && fi.IsDir()
}

// maxMarker bounds the marker's size: a bigger file is not one.
const maxMarker = 256

// checkMarker checks that the marker in dir holds a marker of the version
// this build reads. Any other bytes are damage (a *corrupt.Error matching
// ErrMarkerCorrupt, at the first byte that differs), but for a marker
// whose checksum holds and names another version (ErrMarkerVersion).
func checkMarker(fsys vfs.FS, dir string) error {
	name := path.Join(dir, MarkerName)
	b, err := vfs.ReadPrefix(fsys, name, maxMarker+1)
	if err != nil {
		return err
	}
	if string(b) == markerContent {
		return nil
	}
	if v, ok := parseMarker(b); ok {
		return &corrupt.Error{Err: ErrMarkerVersion, File: name, Offset: int64(len(markerMagic)),
			Reason: fmt.Sprintf("directory layout version %d, this build reads version %d", v, markerVersion)}
	}
	off := 0
	for off < len(b) && off < len(markerContent) && b[off] == markerContent[off] {
		off++
	}
	return &corrupt.Error{Err: ErrMarkerCorrupt, File: name, Offset: int64(off),
		Reason: fmt.Sprintf("the marker must hold %q", markerContent)}
}

// parseMarker returns the version of a well-formed marker of any version,
// whose checksum holds.
func parseMarker(b []byte) (int, bool) {
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) != 4 || lines[3] != "" || lines[0] != markerMagic {
		return 0, false
	}
	var v int
	if _, err := fmt.Sscanf(lines[1], "version %d\n", &v); err != nil || v < 1 || markerBytes(v) != string(b) {
		return 0, false
	}
	return v, true
}

// writeMarker publishes the marker in dir, durably (vfs.Publish: tmp,
// sync, rename, directory sync). A crash before it ends leaves no marker
// or the whole marker, never part of one.
func writeMarker(fsys vfs.FS, dir string) error {
	return vfs.Publish(fsys, dir, MarkerName, func(w io.Writer) error {
		_, err := io.WriteString(w, markerContent)
		return err
	})
}

// noStore is the error of a directory of kind (missing or empty) that
// holds no store when none may be created.
func noStore(dir string, kind DirKind, readOnly bool) error {
	why := "creating one was not asked for"
	if readOnly {
		why = "a read-only open creates nothing"
	}
	return &NoStoreError{Dir: dir, Missing: kind == DirMissing, Why: why}
}

// firstSegmentMissing returns a *wal.CorruptError when a marked directory
// holds neither a snapshot nor a segment: the marker is written only once
// the first segment is durable, so its segments were deleted.
func firstSegmentMissing(dir string, marked, hasSnapshot bool, live []wal.SegmentNum) error {
	if !marked || hasSnapshot || len(live) > 0 {
		return nil
	}
	return &wal.CorruptError{Err: wal.ErrCorrupt, File: wal.SegmentPath(dir, 1), Offset: -1,
		Reason: fmt.Sprintf("segment missing: %s says a store was created here, which wrote %s before it, and there is no snapshot",
			MarkerName, wal.SegmentName(1))}
}

// createSegment creates segment seg as wal.Create does, and removes it
// again when its creation fails part way (a full disk), so that a failed
// open leaves no new file behind. The removal need not be durable: a
// segment that holds no record and comes back after a crash is what a
// crash while creating it leaves, which recovery accepts. A file that
// was there already (the create's O_EXCL failed) is not touched.
func createSegment(fsys vfs.FS, dir string, seg wal.SegmentNum, opts wal.Options) (*wal.Writer, error) {
	w, err := wal.Create(fsys, dir, seg, opts)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		fsys.Remove(wal.SegmentPath(dir, seg))
	}
	return w, err
}

// WriteMarker publishes the marker (MarkerName) in dir, durably. It is
// for kv.Restore, which makes a store out of a backup without a writable
// recovery and marks it, as recovery marks a store it created, once its
// snapshot and first segment are durable: call it only then.
func WriteMarker(fsys vfs.FS, dir string) error { return writeMarker(fsys, dir) }
