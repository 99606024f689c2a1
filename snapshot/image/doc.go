// Package image writes and reads the snapshot image, snapshot format
// version 5 (FORMAT.md, "Snapshot image"): the entries of a snapshot
// sorted in checksummed 4 KiB blocks, the leases and a block index with a
// checksum per page, a hash index of checksummed pages and a footer, so
// that a reader opens it by reading a few kilobytes and serves each
// lookup from the page or two that hold the key, straight from a mapping
// of the file. It reads versions 3 and 4 too.
//
// A store's checkpoint writes its snapshot as an image (recovery's
// WriteCheckpoint), and a store serves its reads from the image in place
// (OpenAny, and package layered, which holds the changes since over it).
// The readers that read every entry use ReadAny, which reads a snapshot
// of any version (1 and 2 through package snapshot, 3 to 5 here) and
// verifies an image whole first; ReadAnyMeta reads its first record,
// SalvageAny what of it reads.
//
// # Guarantees
//
// Open checks the first page, the footer, the page checksums of the
// lease section and block index, and the leases: a few kilobytes,
// whatever the image's size (versions 3 and 4: the whole block index
// too, 16 bytes and a key per block). Every other byte is verified
// before the first time it is served: a block's checksum and structure
// on its first read, a hash page's likewise, a page of the block index
// on the first seek that reads it (a bit or a word per block, page and
// hash page records it, atomically). A lookup reaches its block through
// the hash index alone; only a scan that starts at a key reads the block
// index, and a scan checks that each block starts above the last key of
// the block before. Damage is never a wrong value: it is
// snapshot.ErrCorrupt in a *corrupt.Error naming the file and the offset
// of the block, page or field that holds it, and only the reads that
// need the damaged bytes fail. A read of the mapping that the kernel
// cannot serve (a disk error, or a file cut short under the mapping),
// which raises SIGBUS, is an error matching vfs.ErrMapFault, never a
// crash: every read of the view runs under debug.SetPanicOnFault and
// vfs.Mapping.CatchFault. Verify reads and checks everything, as `kv DIR
// check` would.
//
// # Entry lifetime
//
// No method hands out a slice of the mapping. Get returns an entry whose
// Key and Value are a fresh copy, the caller's for good (after Close
// too); GetAppend copies them into the caller's buffer; All copies each
// block it reaches into a buffer of its own, once, and yields entries
// from there (AllStable into memory no later step reuses, so that the
// entries stay valid; Clone gives a handle that keeps the mapping for a
// view that outlives the Reader it came from). The copy is a
// few nanoseconds next to the lookup, and it is what lets the store keep
// its promise that an Entry stays valid for as long as it is held while
// images are swapped under it, and keeps every read of the mapping (which
// may fault) inside the package, under its fault guard.
//
// Close never waits: later calls return ErrClosed, and the mapping is
// unmapped when the last call in progress (an All iteration included)
// returns. A use of the mapping after its unmap is therefore impossible
// through this API, which the tests show by closing readers under
// concurrent Gets and iterations and reading what they returned
// afterwards.
//
// # Crash contract
//
// Write publishes an image as every snapshot is published (vfs.Publish:
// tmp file, fdatasync, rename, directory fsync), its meta frame, the
// first record, naming the covered segment: after a crash the name holds
// the old file or the new one, whole. An image is never damaged by a
// crash, so any damage found in one is corruption.
//
// # Usage
//
//	err := image.Write(fsys, dir, "snapshot", snapshot.Meta{Covered: c, Revision: rev}, leases, m.All(nil, nil), image.Options{})
//	r, err := image.Open(fsys, path.Join(dir, "snapshot"))
//	defer r.Close()
//	e, ok, err := r.Get([]byte("k"))
//	for e, err := range r.All(start, end) { ... }
package image
