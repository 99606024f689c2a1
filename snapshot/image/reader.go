package image

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/internal/mem"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Reader serves an image from a read-only view of its file (vfs.Map). It
// is safe for concurrent use. Every method returns copies: no slice it
// hands out points into the view, so nothing a caller holds is touched by
// Close (see the package doc).
type Reader struct {
	*mapped
	// closed is this handle's: Close drops its reference once.
	closed atomic.Bool
}

// mapped is what the handles of one image share (see Reader.Clone): the
// view, its layout, the verified bits and the reference count.
type mapped struct {
	name string
	m    *vfs.Mapping
	b    []byte // m.Bytes(), kept while refs > 0

	meta      snapshot.Meta
	version   uint16
	slots     slotLayout // where the hash slots keep their fields
	seed      uint64
	nblocks   uint64
	dataPages uint64
	leaseOff  uint64 // the lease section
	leaseLen  uint64
	itemsOff  uint64 // the block index items
	keysOff   uint64 // the block index keys
	keysLen   uint64
	secEnd    uint64 // the block index's end; version 5's page checksums follow
	hashOff   uint64
	hashPages uint64
	nslots    uint64

	blockOK []atomic.Uint64 // a bit per block: verified
	// pages holds the first page of each verified block i, and of the
	// page after it, at i and i+1, from the block index as Open checked
	// it: a lookup in a verified block finds its pages here, in 4 bytes
	// a block of the heap, rather than in the mapped index (about 7% of a
	// Get of 1M keys); nil for an image of 2^32 pages or more (16 TiB),
	// which reads the index. A block's verification fills its two before
	// it sets the block's bit, not Open: a new process's first writes to
	// the array fault its pages in (0.35 ms of a 3 ms reopen of 1M keys
	// here), and most one-shot processes look up a few blocks.
	pages  []atomic.Uint32
	hashOK []atomic.Uint64 // a bit per hash page: verified
	// hashAhead is set once the hash index was asked to be read ahead
	// (hashPage, at the first page it verifies).
	hashAhead atomic.Bool

	// byPage is set for Version, whose hash slots name a block by its
	// first page and whose block index is verified a page at a time.
	byPage bool
	// secOK holds a bit per page of the lease section and block index:
	// verified (version 5).
	secOK []atomic.Uint64
	// ends holds, for each data page p (at p−1), the page after the
	// block starting there once it is verified, 0 before (version 5): a
	// lookup finds a verified block's extent in 4 bytes a page of the
	// heap, and needs no block index.
	ends pageEnds

	// refs is 1 per handle not closed (see Clone) plus 1 per call in
	// progress; the view is released when it reaches 0.
	refs atomic.Int64
	// unmapped is closed once the view is released (for the tests).
	unmapped chan struct{}
}

// Open opens the image in file name. It reads the first page, the
// footer, the page checksum table and the leases (versions 3 and 4: the
// whole block index too), and checks them (FORMAT.md, "Snapshot image",
// step 1); blocks, hash pages and the block index's pages are verified
// when first read.
// Damage is snapshot.ErrCorrupt in a *corrupt.Error naming the file and
// offset; another format version is snapshot.ErrVersion.
func Open(fsys vfs.FS, name string) (*Reader, error) {
	m, err := mapRandom(fsys, name)
	if err != nil {
		return nil, err
	}
	return openMapping(m, name)
}

// mapRandom maps file name, advised AdviceRandom before a byte of it is
// read. Lookups read a page or two each, and open reads the first page,
// the footer, the page checksums and the leases (versions 3 and 4: the
// block index, which it asks for whole): no read-ahead around any of
// them. A first read before the advice (the version in the header)
// faulted in the kernel's read-around, the whole read-ahead window: from
// a cold cache, 8 MiB of the image on the bench machine's disk
// (read_ahead_kb 8192), and a cold reopen of 1M keys took about 10 ms
// rather than 1.6 ms (TestOpenColdReadsFewPages counts the pages).
func mapRandom(fsys vfs.FS, name string) (*vfs.Mapping, error) {
	m, err := vfs.MapFile(fsys, name)
	if err != nil {
		return nil, err
	}
	m.Advise(0, int64(len(m.Bytes())), vfs.AdviceRandom)
	return m, nil
}

// openMapping is Open of m, the mapping of file name made by mapRandom,
// which it closes on an error.
func openMapping(m *vfs.Mapping, name string) (*Reader, error) {
	r := &Reader{mapped: &mapped{name: name, m: m, b: m.Bytes(), unmapped: make(chan struct{})}}
	r.refs.Store(1)
	if err := r.open(); err != nil {
		m.Close()
		return nil, err
	}
	return r, nil
}

func (r *Reader) corrupt(off uint64, format string, args ...any) error {
	return &corrupt.Error{Err: snapshot.ErrCorrupt, File: r.name, Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
}

func u64(b []byte, off uint64) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
func u32(b []byte, off uint64) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func u16(b []byte, off uint64) uint16 { return binary.LittleEndian.Uint16(b[off:]) }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// open checks what Open reads: the first page, the footer, the page
// checksum table and the leases (versions 3 and 4: the block index).
func (r *Reader) open() (err error) {
	defer r.m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	b := r.b
	size := uint64(len(b))
	if size < fileHeaderSize {
		return r.corrupt(0, "file of %d bytes: cut short", size)
	}
	if [6]byte(b[:6]) != magic {
		return r.corrupt(0, "bad magic")
	}
	switch r.version = u16(b, 6); r.version {
	case Version, VersionBlockNumbered:
		r.slots = slotsByOffset
	case VersionNamedByPosition:
		r.slots = slotsByPosition
	default:
		return errOtherVersion(r.name, r.version)
	}
	if size < 2*PageSize+FooterSize {
		return r.corrupt(fileHeaderSize, "file of %d bytes: cut short", size)
	}
	fr := b[fileHeaderSize:]
	if crc(fr[4:metaFrameSize]) != u32(fr, 0) {
		return r.corrupt(fileHeaderSize, "meta frame checksum mismatch")
	}
	if u32(fr, 4) != metaPayloadSize || fr[8] != frameMeta {
		return r.corrupt(fileHeaderSize, "first frame is not the meta record of a version %d snapshot", r.version)
	}
	r.meta.Covered = wal.SegmentNum(u64(fr, 9))
	r.meta.Revision = record.Revision(u64(fr, 17))
	if r.meta.Revision > record.MaxRevision {
		return r.corrupt(fileHeaderSize, "snapshot revision %d past the largest a store can hold, %d", r.meta.Revision, record.MaxRevision)
	}
	if !allZero(b[fileHeaderSize+metaFrameSize : PageSize]) {
		return r.corrupt(fileHeaderSize+metaFrameSize, "bytes after the meta frame are not zero")
	}

	fo := size - FooterSize
	f := b[fo:]
	if crc(f[:68]) != u32(f, 68) {
		return r.corrupt(fo, "footer checksum mismatch")
	}
	count, nblocks, dpages := u64(f, 0), u64(f, 8), u64(f, 16)
	nleases, leaseLen, idxLen := u64(f, 24), u64(f, 32), u64(f, 40)
	hpages := u64(f, 48)
	r.seed = u64(f, 56)
	filePages := size / PageSize
	switch {
	case dpages > filePages || hpages > filePages || leaseLen > size || idxLen > size:
		return r.corrupt(fo, "sections (%d data pages, %d hash pages, %d and %d bytes) larger than the file", dpages, hpages, leaseLen, idxLen)
	case count > maxPerBlock*dpages:
		return r.corrupt(fo, "%d entries in %d data pages", count, dpages)
	case hpages != hashPages(count):
		return r.corrupt(fo, "%d hash pages for %d entries, want %d", hpages, count, hashPages(count))
	case nblocks > dpages || nblocks > count || (count == 0) != (nblocks == 0) || (nblocks == 0) != (dpages == 0) || nblocks >= maxBlocks:
		return r.corrupt(fo, "%d blocks for %d entries in %d data pages", nblocks, count, dpages)
	case idxLen < itemSize*nblocks || idxLen-itemSize*nblocks > 1<<32-1:
		return r.corrupt(fo, "block index of %d bytes for %d blocks", idxLen, nblocks)
	case nleases > leaseLen/leaseFixed:
		return r.corrupt(fo, "%d leases in %d bytes", nleases, leaseLen)
	}
	secOff := PageSize * (1 + dpages)
	secEnd, tabEnd, hashOff := sectionLayout(r.version, dpages, leaseLen, idxLen)
	if hashOff+PageSize*hpages+FooterSize != size {
		return r.corrupt(fo, "file of %d bytes, the footer's layout makes it %d", size, hashOff+PageSize*hpages+FooterSize)
	}
	if r.version == Version && dpages > maxDataPages {
		return r.corrupt(fo, "%d data pages, more than a hash slot can name", dpages)
	}
	r.meta.Count, r.meta.Leases = count, nleases
	r.nblocks, r.dataPages = nblocks, dpages
	r.leaseOff, r.leaseLen = secOff, leaseLen
	r.secEnd = secEnd
	r.itemsOff = secOff + leaseLen
	r.keysOff = r.itemsOff + itemSize*nblocks
	r.keysLen = idxLen - itemSize*nblocks
	r.hashOff, r.hashPages, r.nslots = hashOff, hpages, hpages*slotsPerPage
	r.hashOK = make([]atomic.Uint64, (hpages+63)/64)

	if r.version == Version {
		// The lease section and block index are checked a page at a
		// time, on first use (section): open reads their page
		// checksums, checked by the footer's, and the leases.
		r.byPage = true
		if crc(b[secEnd:tabEnd]) != u32(f, 64) {
			return r.corrupt(secEnd, "page checksum table checksum mismatch")
		}
		if !allZero(b[tabEnd:hashOff]) {
			return r.corrupt(tabEnd, "bytes after the page checksum table are not zero")
		}
		r.secOK = make([]atomic.Uint64, (sectionPages(secEnd-secOff)+63)/64)
		r.ends = newPageEnds(dpages)
		if err := r.section(secOff, leaseLen); err != nil {
			return err
		}
		_, err := r.parseLeases()
		return err
	}

	// The section is read whole, now: ask for all of it at once, rather
	// than a fault's read-ahead at a time.
	r.m.Advise(int64(secOff), int64(secEnd-secOff), vfs.AdvicePopulate)
	if crc(b[secOff:secEnd]) != u32(f, 64) {
		return r.corrupt(secOff, "lease and block index checksum mismatch")
	}
	if !allZero(b[secEnd:hashOff]) {
		return r.corrupt(secEnd, "bytes after the block index are not zero")
	}
	if dpages < math.MaxUint32 {
		r.pages = make([]atomic.Uint32, nblocks+1)
	}
	if err := r.checkIndex(); err != nil {
		return err
	}
	if _, err := r.parseLeases(); err != nil {
		return err
	}
	r.blockOK = make([]atomic.Uint64, (nblocks+63)/64)
	return nil
}

// checkIndex checks every rule of the block index, whose bytes it reads
// as they are (in version 5, Verify verifies their pages first): most of
// the work of an open of versions 3 and 4, which calls it.
func (r *Reader) checkIndex() error {
	// An item per block: this walk reads each item from slices cut
	// once, and compares pages and keys with the previous item's kept
	// in locals.
	b, dpages, keysLen := r.b, r.dataPages, r.keysLen
	var nextKey uint64
	var prev []byte
	items := b[r.itemsOff:r.keysOff]
	keys := b[r.keysOff : r.keysOff+keysLen]
	prevPage := uint64(0) // block 0 starts at page 1
	for i := uint64(0); len(items) >= itemSize; i++ {
		item := items[:itemSize]
		items = items[itemSize:]
		page := binary.LittleEndian.Uint64(item)
		koff := uint64(binary.LittleEndian.Uint32(item[8:]))
		klen := uint64(binary.LittleEndian.Uint32(item[12:]))
		switch {
		case page <= prevPage || page > dpages || (i == 0 && page != 1):
			return r.corrupt(r.itemsOff+itemSize*i, "block %d at page %d", i, page)
		case koff != nextKey || klen > keysLen-koff:
			return r.corrupt(r.itemsOff+itemSize*i, "block %d: first key at %d, %d bytes, in %d bytes of keys", i, koff, klen, keysLen)
		}
		prevPage, nextKey = page, koff+klen
		k := keys[koff:nextKey]
		// Most keys are above the previous one by their first eight
		// bytes, compared as two numbers without a call.
		if len(prev) >= 8 && len(k) >= 8 && binary.BigEndian.Uint64(prev) < binary.BigEndian.Uint64(k) {
			prev = k
			continue
		}
		if i > 0 && bytes.Compare(prev, k) >= 0 {
			return r.corrupt(r.itemsOff+itemSize*i, "block %d: first key %q not above the previous block's", i, k)
		}
		prev = k
	}
	if nextKey != keysLen {
		return r.corrupt(r.keysOff, "block index keys of %d bytes, the items use %d", keysLen, nextKey)
	}
	return nil
}

// section verifies, in version 5, the pages of the lease section and
// block index that hold bytes off .. off+n−1 of the file (FORMAT.md step
// 5): each against its checksum in the page checksum table, once per
// page per open (a bit per page records it). In the versions before,
// open checked the section whole, and section does nothing.
func (r *Reader) section(off, n uint64) error {
	if !r.byPage || n == 0 {
		return nil
	}
	secOff := r.leaseOff
	for p := (off - secOff) / PageSize; p <= (off+n-1-secOff)/PageSize; p++ {
		if r.secOK[p/64].Load()&(1<<(p%64)) != 0 {
			continue
		}
		from := secOff + p*PageSize
		if crc(r.b[from:min(from+PageSize, r.secEnd)]) != u32(r.b, r.secEnd+4*p) {
			return r.corrupt(from, "lease and block index page %d checksum mismatch", p)
		}
		r.secOK[p/64].Or(1 << (p % 64))
	}
	return nil
}

// parseLeases decodes and checks the lease section.
func (r *Reader) parseLeases() ([]record.Lease, error) {
	b := r.b[r.leaseOff : r.leaseOff+r.leaseLen]
	var out []record.Lease
	var off uint64
	need := func(n uint64) error {
		if n > uint64(len(b))-off {
			return r.corrupt(r.leaseOff+off, "lease section cut short")
		}
		return nil
	}
	var prevID record.LeaseID
	bound := map[string]record.LeaseID{}
	for range r.meta.Leases {
		start := r.leaseOff + off
		if err := need(leaseFixed); err != nil {
			return nil, err
		}
		le := record.Lease{
			ID:       record.LeaseID(u64(b, off)),
			TTL:      int64(u64(b, off+8)),
			Deadline: int64(u64(b, off+16)),
		}
		nkeys := uint64(u32(b, off+24))
		off += leaseFixed
		switch {
		case le.ID <= prevID || record.Revision(le.ID) > r.meta.Revision:
			return nil, r.corrupt(start, "lease %d after lease %d, in a snapshot at revision %d", le.ID, prevID, r.meta.Revision)
		case le.TTL <= 0 || le.Deadline <= 0:
			return nil, r.corrupt(start, "lease %d with ttl %d and deadline %d", le.ID, le.TTL, le.Deadline)
		case nkeys > (uint64(len(b))-off)/4:
			return nil, r.corrupt(start, "lease %d binds %d keys, more than the section holds", le.ID, nkeys)
		}
		prevID = le.ID
		le.Keys = make([][]byte, 0, nkeys)
		for j := range nkeys {
			if err := need(4); err != nil {
				return nil, err
			}
			kl := uint64(u32(b, off))
			if err := need(4 + kl); err != nil {
				return nil, err
			}
			k := bytes.Clone(b[off+4 : off+4+kl])
			if j > 0 && bytes.Compare(le.Keys[j-1], k) >= 0 {
				return nil, r.corrupt(r.leaseOff+off, "key %q of lease %d out of order", k, le.ID)
			}
			if other, ok := bound[string(k)]; ok {
				return nil, r.corrupt(r.leaseOff+off, "key %q bound to leases %d and %d", k, other, le.ID)
			}
			bound[string(k)] = le.ID
			le.Keys = append(le.Keys, k)
			off += 4 + kl
		}
		out = append(out, le)
	}
	if off != uint64(len(b)) {
		return nil, r.corrupt(r.leaseOff+off, "%d bytes after the last lease", uint64(len(b))-off)
	}
	return out, nil
}

// acquire takes a reference for a call; it fails once the Reader is
// closed.
func (r *Reader) acquire() error {
	if r.closed.Load() {
		return ErrClosed
	}
	for {
		n := r.refs.Load()
		if n == 0 {
			return ErrClosed
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

// release drops a reference; the last releases the view.
func (r *mapped) release() {
	if r.refs.Add(-1) == 0 {
		// Nothing can read the view any more: no call is in progress,
		// and none hands out a slice of it.
		r.m.Close()
		close(r.unmapped)
	}
}

// Close closes the Reader: every later call returns ErrClosed. The view
// is released (unmapped) when the last call in progress returns, at once
// if none is: Close never waits, and since no method hands out a slice of
// the view, what callers hold stays valid.
func (r *Reader) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	r.release()
	return nil
}

// Clone returns another handle on the same image, which keeps its view
// mapped until the handle is closed, whatever becomes of r: a store takes
// one for a scan, so that the scan can go on after a checkpoint closed the
// image it started on. The handles share what they verified. It fails
// with ErrClosed once r is closed.
func (r *Reader) Clone() (*Reader, error) {
	if err := r.acquire(); err != nil {
		return nil, err
	}
	return &Reader{mapped: r.mapped}, nil
}

// Meta returns the image's first record (covered segment, revision) with
// its entry and lease counts.
func (r *Reader) Meta() snapshot.Meta { return r.meta }

// Size returns the image file's size in bytes.
func (r *Reader) Size() int64 { return int64(len(r.b)) }

// Len returns the number of entries.
func (r *Reader) Len() int { return int(r.meta.Count) }

// Revision returns the snapshot's revision.
func (r *Reader) Revision() record.Revision { return r.meta.Revision }

// Covered returns the highest segment the snapshot covers.
func (r *Reader) Covered() wal.SegmentNum { return r.meta.Covered }

// Leases returns the live leases, in ascending id order, each with its
// keys (copies), after checking that every key bound is an entry.
func (r *Reader) Leases() (_ []record.Lease, err error) {
	if err := r.acquire(); err != nil {
		return nil, err
	}
	defer r.release()
	defer r.m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	les, err := r.parseLeases()
	if err != nil {
		return nil, err
	}
	for i := range les {
		for _, k := range les[i].Keys {
			_, _, ok, err := r.find(k)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, r.corrupt(r.leaseOff, "lease %d binds key %q, which is not in the snapshot", les[i].ID, k)
			}
		}
	}
	return les, nil
}

// indexItem returns block i's first page and first key from the block
// index, after verifying the pages they lie in (version 5; open checked
// the whole index before) and that they lie in the data pages and the
// index's keys: what a seek uses. That the items are in order as a whole
// is Verify's to check, in version 5; a made-up file whose page
// checksums hold can make a seek start at the wrong block, never read
// outside the file.
func (r *Reader) indexItem(i uint64) (page uint64, first []byte, err error) {
	it := r.itemsOff + itemSize*i
	if err := r.section(it, itemSize); err != nil {
		return 0, nil, err
	}
	page = u64(r.b, it)
	koff, klen := uint64(u32(r.b, it+8)), uint64(u32(r.b, it+12))
	if page < 1 || page > r.dataPages || i == 0 && page != 1 || klen > r.keysLen || koff > r.keysLen-klen {
		return 0, nil, r.corrupt(it, "block %d at page %d, its first key at %d, %d bytes, in %d bytes of keys", i, page, koff, klen, r.keysLen)
	}
	if err := r.section(r.keysOff+koff, klen); err != nil {
		return 0, nil, err
	}
	return page, r.b[r.keysOff+koff : r.keysOff+koff+klen], nil
}

// item returns block i's first page, its page count and its first key,
// from an index checked whole (at open, or by Verify in version 5).
func (r *Reader) item(i uint64) (page, pages uint64, first []byte) {
	it := r.itemsOff + itemSize*i
	page = u64(r.b, it)
	next := r.dataPages + 1
	if i+1 < r.nblocks {
		next = u64(r.b, it+itemSize)
	}
	koff, klen := uint64(u32(r.b, it+8)), uint64(u32(r.b, it+12))
	return page, next - page, r.b[r.keysOff+koff : r.keysOff+koff+klen]
}

// block returns block i's bytes, verified (FORMAT.md step 2) before the
// first time they are returned: versions 3 and 4, whose block index open
// checked.
func (r *Reader) block(i uint64) ([]byte, error) {
	if r.pages != nil && r.blockOK[i/64].Load()&(1<<(i%64)) != 0 {
		return r.b[uint64(r.pages[i].Load())*PageSize : uint64(r.pages[i+1].Load())*PageSize], nil
	}
	page, pages, first := r.item(i)
	blk := r.b[page*PageSize : (page+pages)*PageSize]
	if err := r.verifyBlock(blockName{n: i}, page*PageSize, pages, blk, first, true); err != nil {
		return nil, err
	}
	if r.pages != nil {
		// Any two verifications store the same values here: the
		// index's, which no one changes.
		r.pages[i].Store(uint32(page))
		r.pages[i+1].Store(uint32(page + pages))
	}
	r.blockOK[i/64].Or(1 << (i % 64))
	return blk, nil
}

// blockAt returns the block that starts at data page p (1 .. D),
// verified (FORMAT.md step 2) before the first time it is returned:
// version 5, whose lookups and scans reach a block by its page, with no
// need of the block index.
func (r *Reader) blockAt(p uint64) ([]byte, error) {
	if end := r.ends.load(p - 1); end != 0 {
		return r.b[p*PageSize : uint64(end)*PageSize], nil
	}
	off := p * PageSize
	pages := uint64(u32(r.b, off+4))
	if pages == 0 || pages > r.dataPages+1-p {
		return nil, r.corrupt(off, "%v of %d pages, past the data pages' %d", blockName{n: p, page: true}, pages, r.dataPages)
	}
	blk := r.b[off : off+pages*PageSize]
	if err := r.verifyBlock(blockName{n: p, page: true}, off, pages, blk, nil, false); err != nil {
		return nil, err
	}
	// Any two verifications store the same value.
	r.ends.store(p-1, uint32(p+pages))
	return blk, nil
}

// blockName names a block in an error: by its number, or (page set) by
// its first page.
type blockName struct {
	n    uint64
	page bool
}

func (b blockName) String() string {
	if b.page {
		return fmt.Sprintf("the block at page %d", b.n)
	}
	return fmt.Sprintf("block %d", b.n)
}

// verifyBlock checks the block blk at offset off, of pages pages: its
// checksum, count, offsets, entries and padding, and, when indexed, its
// pages and its first and last keys against the block index's item
// name.n and the next.
func (r *Reader) verifyBlock(name blockName, off, pages uint64, blk, first []byte, indexed bool) error {
	if crc(blk[4:]) != u32(blk, 0) {
		return r.corrupt(off, "%v checksum mismatch", name)
	}
	n := uint64(u16(blk, 8))
	switch {
	case uint64(u32(blk, 4)) != pages:
		return r.corrupt(off, "%v of %d pages, the block index says %d", name, u32(blk, 4), pages)
	case n == 0 || n > maxPerBlock || (pages > 1 && n != 1) || u16(blk, 10) != 0:
		return r.corrupt(off, "%v of %d pages holds %d entries", name, pages, n)
	}
	at := blockHeaderSize + 2*n
	var prev []byte
	size := uint64(len(blk))
	for j := range n {
		eoff := off + at
		if uint64(u16(blk, blockHeaderSize+2*j)) != at || at+entryFixed > size {
			return r.corrupt(off, "%v: entry %d not at offset %d", name, j, at)
		}
		kl := uint64(u32(blk, at+24))
		if kl > size-at-entryFixed {
			return r.corrupt(eoff, "%v: key length %d past the block", name, kl)
		}
		vl := uint64(u32(blk, at+24+4+kl))
		if vl > size-at-entryFixed-kl {
			return r.corrupt(eoff, "%v: value length %d past the block", name, vl)
		}
		create, mod, version := u64(blk, at), u64(blk, at+8), u64(blk, at+16)
		key := blk[at+28 : at+28+kl]
		switch {
		case create < 1 || create > mod || mod > uint64(r.meta.Revision) || version < 1 || version > uint64(record.MaxRevision):
			return r.corrupt(eoff, "key %q with revisions %d/%d and version %d in a snapshot at revision %d", key, create, mod, version, r.meta.Revision)
		case indexed && j == 0 && !bytes.Equal(key, first):
			return r.corrupt(eoff, "%v starts with %q, the block index says %q", name, key, first)
		case j > 0 && bytes.Compare(prev, key) >= 0:
			return r.corrupt(eoff, "key %q out of order", key)
		}
		prev = key
		at += entryFixed + kl + vl
		if pages > 1 && blockPages(at-blockHeaderSize-2) != pages || pages == 1 && at > PageSize {
			return r.corrupt(eoff, "an entry of %d bytes in a block of %d pages", at-blockHeaderSize-2, pages)
		}
	}
	if !allZero(blk[at:]) {
		return r.corrupt(off+at, "%v: bytes after its entries are not zero", name)
	}
	if i := name.n; indexed && i+1 < r.nblocks {
		if _, _, next := r.item(i + 1); bytes.Compare(prev, next) >= 0 {
			return r.corrupt(off, "%v ends with %q, not below the next block's first key", name, prev)
		}
	}
	return nil
}

// hashPage returns hash page p, verified (FORMAT.md step 3) before the
// first time it is returned.
func (r *Reader) hashPage(p uint64) ([]byte, error) {
	off := r.hashOff + p*PageSize
	pg := r.b[off : off+PageSize]
	if r.hashOK[p/64].Load()&(1<<(p%64)) != 0 {
		return pg, nil
	}
	if n := r.hashPages * PageSize; n <= hashAheadMax && !r.hashAhead.Load() && r.hashAhead.CompareAndSwap(false, true) {
		// The first lookup: have the kernel read the whole hash index
		// in the background, so that a lookup on a cold cache reads
		// one page (its entry's), not two. The open itself still reads
		// a few kilobytes.
		r.m.Advise(int64(r.hashOff), int64(n), vfs.AdviceWillNeed)
	}
	if crc(pg[4:]) != u32(pg, 0) {
		return nil, r.corrupt(off, "hash page %d checksum mismatch", p)
	}
	if u32(pg, 4) != 0 {
		return nil, r.corrupt(off+4, "hash page %d: reserved bytes not zero", p)
	}
	for j := range uint64(slotsPerPage) {
		s := u64(pg, hashPageHead+8*j)
		if s == 0 {
			continue
		}
		bi, pos := r.slots.split(s)
		if s&r.slots.occupied() == 0 || !r.slotBlockOK(bi) || !r.slotPosOK(pos) {
			return nil, r.corrupt(off+hashPageHead+8*j, "hash slot %#x", s)
		}
	}
	r.hashOK[p/64].Or(1 << (p % 64))
	return pg, nil
}

// entryAt returns the offset in blk of its entry j.
func entryAt(blk []byte, j uint64) uint64 { return uint64(u16(blk, blockHeaderSize+2*j)) }

// entryKey returns the key of the entry at offset at of a verified block.
func entryKey(blk []byte, at uint64) []byte {
	kl := uint64(u32(blk, at+24))
	return blk[at+28 : at+28+kl]
}

// isImageVersion reports whether v is a version of the image format.
func isImageVersion(v uint16) bool { return v >= VersionNamedByPosition && v <= Version }

// errOtherVersion is the error for a file of version v, which is not an
// image's.
func errOtherVersion(name string, v uint16) error {
	return &corrupt.Error{Err: snapshot.ErrVersion, File: name, Offset: 6,
		Reason: fmt.Sprintf("snapshot format version %d, this reader reads versions %d to %d", v, VersionNamedByPosition, Version)}
}

// slotBlockOK reports whether bi can name a block: a data page (version
// 5), or a block number below B.
func (r *Reader) slotBlockOK(bi uint64) bool {
	if r.byPage {
		return bi >= 1 && bi <= r.dataPages
	}
	return bi < r.nblocks
}

// slotPosOK reports whether pos can name an entry in a block: an offset
// after a header and an offset table of one entry, with room for an
// entry's fixed fields in the block's first page (versions 4 and 5), or a
// position below the most entries a block holds (version 3).
func (r *Reader) slotPosOK(pos uint64) bool {
	if r.slots == slotsByPosition {
		return pos < maxPerBlock
	}
	return pos >= minEntryAt && pos <= PageSize-entryFixed
}

// find looks key up: the verified block holding it and the entry's
// offset in it.
func (r *Reader) find(key []byte) (blk []byte, at uint64, ok bool, err error) {
	if r.meta.Count == 0 {
		return nil, 0, false, nil
	}
	h := xxh64(key, r.seed)
	shift := r.slots.tagShift()
	tag := h >> shift
	j := probeStart(h, r.nslots)
	for range r.nslots {
		p, s := j/slotsPerPage, j%slotsPerPage
		pg, err := r.hashPage(p)
		if err != nil {
			return nil, 0, false, err
		}
		slot := u64(pg, hashPageHead+8*s)
		if slot == 0 {
			return nil, 0, false, nil
		}
		if slot>>shift == tag {
			bi, pos := r.slots.split(slot)
			var blk []byte
			if r.byPage {
				blk, err = r.blockAt(bi)
			} else {
				blk, err = r.block(bi)
			}
			if err != nil {
				return nil, 0, false, err
			}
			at := pos
			if r.slots == slotsByPosition {
				if pos >= uint64(u16(blk, 8)) {
					return nil, 0, false, r.corrupt(r.hashOff+p*PageSize+hashPageHead+8*s, "hash slot names entry %d of block %d, which holds %d", pos, bi, u16(blk, 8))
				}
				at = entryAt(blk, pos)
			} else {
				// The entry's first line is read next, and its value
				// runs into the lines after: start them together (Gets
				// on 1M keys of 100-byte values about 10% faster). A
				// prefetch past the block reads a line nobody uses;
				// it never faults.
				base := uintptr(unsafe.Pointer(unsafe.SliceData(blk))) + uintptr(at)
				mem.Prefetch(base + 64)
				mem.Prefetch(base + 128)
				if !entryFits(blk, at) {
					// Only a slot that names no entry's offset, in a
					// hash page whose checksum holds, gets here: a full
					// verification (Verify) finds every such slot.
					return nil, 0, false, r.corrupt(r.hashOff+p*PageSize+hashPageHead+8*s, "hash slot names offset %d of block %d, where no entry fits", pos, bi)
				}
			}
			if bytes.Equal(entryKey(blk, at), key) {
				return blk, at, true, nil
			}
		}
		if j++; j == r.nslots {
			j = 0
		}
	}
	return nil, 0, false, r.corrupt(r.hashOff, "no empty slot in the hash index")
}

// entryFits reports whether an entry at offset at (at most PageSize −
// entryFixed) of a verified block, with the key and value lengths found
// there, lies within the block: what entryKey and decode read.
func entryFits(blk []byte, at uint64) bool {
	size := uint64(len(blk))
	kl := uint64(u32(blk, at+24))
	if kl > size-at-entryFixed {
		return false
	}
	return uint64(u32(blk, at+28+kl)) <= size-at-entryFixed-kl
}

// decode appends the entry at offset at of a verified block to buf and
// returns it, its Key and Value pointing into the returned buf.
func decode(blk []byte, at uint64, buf []byte) (record.Entry, []byte) {
	kl := uint64(u32(blk, at+24))
	vl := uint64(u32(blk, at+28+kl))
	n := len(buf)
	buf = slices.Grow(buf, int(kl+vl))
	buf = append(buf, blk[at+28:at+28+kl]...)
	buf = append(buf, blk[at+32+kl:at+32+kl+vl]...)
	e := record.Entry{
		CreateRev: record.Revision(u64(blk, at)),
		ModRev:    record.Revision(u64(blk, at+8)),
		Version:   int64(u64(blk, at+16)),
		Key:       buf[n : n+int(kl) : n+int(kl)],
		Value:     buf[n+int(kl) : len(buf) : len(buf)],
	}
	return e, buf
}

// Get returns the entry of key. Its Key and Value are the caller's: a
// fresh copy, valid after Close. Damage met on the way (a block or hash
// page that fails its check) is snapshot.ErrCorrupt naming the file and
// offset; a read of the mapped file that fails, an error matching
// vfs.ErrMapFault.
func (r *Reader) Get(key []byte) (record.Entry, bool, error) {
	e, _, ok, err := r.GetAppend(nil, key)
	return e, ok, err
}

// GetAppend is Get with the entry's Key and Value appended to buf (grown
// when it has no room), which it returns, so that a caller passing it
// back (as out[:0]) allocates nothing. The entry points into out: it is
// valid until the caller reuses out.
func (r *Reader) GetAppend(buf, key []byte) (e record.Entry, out []byte, ok bool, err error) {
	if err := r.acquire(); err != nil {
		return record.Entry{}, buf, false, err
	}
	defer r.release()
	defer r.m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	blk, at, ok, err := r.find(key)
	if !ok || err != nil {
		return record.Entry{}, buf, false, err
	}
	e, buf = decode(blk, at, buf)
	return e, buf, true, nil
}

// Has reports whether key is in the image, reading what Get reads but
// copying nothing out.
func (r *Reader) Has(key []byte) (ok bool, err error) {
	if err := r.acquire(); err != nil {
		return false, err
	}
	defer r.release()
	defer r.m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	_, _, ok, err = r.find(key)
	return ok, err
}

// cursor walks the entries in key order. It copies each block it
// reaches out of the view, once, under the fault guard, and decodes the
// entries from its copy: a walk pays one guarded copy per block, not per
// entry, and what it yields never points into the view.
type cursor struct {
	r   *Reader
	b   uint64 // the block
	p   uint64 // its first page (version 5)
	j   uint64 // the entry in it
	n   uint64 // the entries in block b, once loaded
	blk []byte // a copy of block b, verified, when loaded
	ok  bool   // blk holds block b
	// fresh copies each block into memory of its own, which no later
	// step overwrites (AllStable): the next free part of slab.
	fresh bool
	slab  []byte
	// drop takes the pages behind the walk out of the process's
	// resident memory (AllOnce): dropped is the offset up to which it
	// has.
	drop    bool
	dropped uint64
	// ahead is the offset up to which the walk has asked the kernel to
	// read the file ahead of it (readAhead).
	ahead uint64
	// last is the last key of the block loaded before (version 5, whose
	// blocks are verified without the block index: the order across
	// them is checked as a walk goes), when hasLast. It points into the
	// view, not a copy: it is read only in load, under the fault guard,
	// while the walk holds its reference on the view.
	last    []byte
	hasLast bool
}

// hashAheadMax is the largest hash index the first lookup has read ahead
// whole (32 MiB: about 3M keys); a bigger one is read a page a fault.
// On 1M keys and a cold cache, random Gets ran at half pebble's rate
// (kvbench get1.cold.ops) reading a hash page and a block each.
const hashAheadMax = 32 << 20

// readAhead is how far ahead of itself a walk has the kernel read the
// image: on a cold cache a full scan of 1M keys through a mapping advised
// random, a page a fault, ran at a fifth of pebble's speed in kvbench
// (scan.cold.s); asked 2 MiB at a time, ahead by at least 1 MiB, the
// disk reads in large requests while the walk goes on.
const readAhead = 2 << 20

// dropStep is how far a walk of AllOnce goes between two drops of the
// pages behind it (a variable for the tests, which drop every page).
var dropStep uint64 = 1 << 20

// slabSize is the size of the buffers AllStable copies blocks into: one
// allocation per several blocks, of the largest size the Go allocator
// keeps in its per-size caches, so that slabs dropped are reused rather
// than returned to the system and faulted back.
const slabSize = 32 << 10

// load copies block c.b out of the view.
func (c *cursor) load() (err error) {
	r := c.r
	defer r.m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var blk []byte
	if r.byPage {
		blk, err = r.blockAt(c.p)
	} else {
		blk, err = r.block(c.b)
	}
	if err != nil {
		return err
	}
	off := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(blk))) - uintptr(unsafe.Pointer(unsafe.SliceData(r.b))))
	if off+readAhead/2 >= c.ahead {
		// The mapping is advised random (mapRandom), which reads a page
		// a fault: a walk asks for the next blocks ahead of it instead.
		from := max(off, c.ahead)
		c.ahead = off + readAhead
		r.m.Advise(int64(from), int64(c.ahead-from), vfs.AdviceWillNeed)
	}
	if c.drop && off >= c.dropped+dropStep {
		// Every block before this one is copied and done with.
		r.m.Advise(int64(c.dropped), int64(off-c.dropped), vfs.AdviceDontNeed)
		c.dropped = off
	}
	if c.fresh {
		if cap(c.slab)-len(c.slab) < len(blk) {
			c.slab = make([]byte, 0, max(slabSize, len(blk)))
		}
		n := len(c.slab)
		c.slab = append(c.slab, blk...)
		c.blk = c.slab[n:len(c.slab):len(c.slab)]
	} else {
		c.blk = append(c.blk[:0], blk...)
	}
	c.n = uint64(u16(c.blk, 8))
	if r.byPage {
		first := entryKey(c.blk, entryAt(c.blk, 0))
		if c.hasLast && bytes.Compare(c.last, first) >= 0 {
			return r.corrupt(c.p*PageSize, "%v starts with %q, not above the previous block's last key %q", blockName{n: c.p, page: true}, first, c.last)
		}
		c.last, c.hasLast = entryKey(blk, entryAt(blk, c.n-1)), true
	}
	c.ok = true
	return nil
}

// done reports whether c is past the last block.
func (c *cursor) done() bool {
	if c.r.byPage {
		return c.p > c.r.dataPages
	}
	return c.b >= c.r.nblocks
}

// advance moves c to the first entry of the block after the loaded one.
func (c *cursor) advance() {
	c.b, c.p, c.j, c.ok = c.b+1, c.p+uint64(u32(c.blk, 4)), 0, false
}

// seek places c at the first entry whose key is start or above.
func (c *cursor) seek(start []byte) (err error) {
	r := c.r
	c.b, c.p, c.j, c.ok = 0, 1, 0, false
	if r.nblocks == 0 || start == nil {
		return nil
	}
	// The last block whose first key is start or below.
	i, err := func() (i int, err error) {
		defer r.m.CatchFault(&err)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		i = sort.Search(int(r.nblocks), func(i int) bool {
			if err != nil {
				return true
			}
			var first []byte
			_, first, err = r.indexItem(uint64(i))
			return err != nil || bytes.Compare(first, start) > 0
		})
		if err == nil && i > 0 {
			c.p, _, err = r.indexItem(uint64(i - 1))
		}
		return i, err
	}()
	if err != nil || i == 0 {
		return err
	}
	c.b = uint64(i - 1)
	if err := c.load(); err != nil {
		return err
	}
	c.j = uint64(sort.Search(int(c.n), func(j int) bool {
		return bytes.Compare(entryKey(c.blk, entryAt(c.blk, uint64(j))), start) >= 0
	}))
	if c.j == c.n {
		c.advance()
	}
	return nil
}

// next decodes the entry at c into e, its Key and Value pointing into
// c's copy of the block (valid until the cursor loads the next block),
// and moves on; ok is false at the end.
func (c *cursor) next(e *record.Entry) (ok bool, err error) {
	if !c.ok {
		// A block loaded is one not done with: the end is looked for
		// once a block.
		if c.done() {
			return false, nil
		}
		if err := c.load(); err != nil {
			return false, err
		}
	}
	at := entryAt(c.blk, c.j)
	kl := uint64(u32(c.blk, at+24))
	vl := uint64(u32(c.blk, at+28+kl))
	*e = record.Entry{
		CreateRev: record.Revision(u64(c.blk, at)),
		ModRev:    record.Revision(u64(c.blk, at+8)),
		Version:   int64(u64(c.blk, at+16)),
		Key:       c.blk[at+28 : at+28+kl : at+28+kl],
		Value:     c.blk[at+32+kl : at+32+kl+vl : at+32+kl+vl],
	}
	if c.j++; c.j == c.n {
		c.advance()
	}
	return true, nil
}

// All returns the entries with start <= key < end in key order (a nil
// end: to the last). The entry yielded, its Key and Value included,
// points into a buffer of the iteration that a later step overwrites:
// copy what you keep. Damage stops the walk with its error as the last
// pair; entries before it were verified. An iteration in progress keeps
// the view mapped past Close until it ends.
func (r *Reader) All(start, end []byte) iter.Seq2[*record.Entry, error] {
	return r.all(start, end, false)
}

// AllStable is All whose entries' Key and Value stay valid after the
// step that yields them (the *Entry itself is still reused): each block
// is copied into memory of its own (slabs of a few blocks), which an
// entry held keeps alive.
func (r *Reader) AllStable(start, end []byte) iter.Seq2[*record.Entry, error] {
	return r.all(start, end, true)
}

// AllOnce is All for a walk that reads each block once and does not come
// back, as a checkpoint's: the pages behind it leave the process's
// resident memory as it goes, a MiB at a time (they stay in the page
// cache; see vfs.AdviceDontNeed). Without it, a checkpoint of a 1M-key
// store held its 130 MB image resident beside the heap, and that was the
// process's peak. Other readers of the view are unaffected but for a
// minor fault on a page dropped.
func (r *Reader) AllOnce(start, end []byte) iter.Seq2[*record.Entry, error] {
	return r.walk(start, end, false, true)
}

func (r *Reader) all(start, end []byte, fresh bool) iter.Seq2[*record.Entry, error] {
	return r.walk(start, end, fresh, false)
}

func (r *Reader) walk(start, end []byte, fresh, drop bool) iter.Seq2[*record.Entry, error] {
	return func(yield func(*record.Entry, error) bool) {
		if err := r.acquire(); err != nil {
			yield(nil, err)
			return
		}
		defer r.release()
		c := &cursor{r: r, fresh: fresh, drop: drop}
		if err := c.seek(start); err != nil {
			yield(nil, err)
			return
		}
		var e record.Entry
		for {
			ok, err := c.next(&e)
			if err != nil {
				yield(nil, err)
				return
			}
			if !ok || end != nil && bytes.Compare(e.Key, end) >= 0 {
				return
			}
			if !yield(&e, nil) {
				return
			}
		}
	}
}

// Verify checks the whole image (FORMAT.md, "Snapshot image", step 6):
// every block and hash page, in version 5 the whole block index and each
// block against it, the entry count, each entry found through the hash
// index at its own slot and no other slot in use, and every key a lease
// binds. It reads the whole file.
func (r *Reader) Verify() (err error) {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.release()
	defer r.m.CatchFault(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	r.m.Advise(0, int64(len(r.b)), vfs.AdviceSequential)
	defer r.m.Advise(0, int64(len(r.b)), vfs.AdviceRandom)
	if r.byPage {
		// The block index, whole, and each block against it.
		if err := r.section(r.leaseOff, r.secEnd-r.leaseOff); err != nil {
			return err
		}
		if err := r.checkIndex(); err != nil {
			return err
		}
	}
	var n uint64
	for i := range r.nblocks {
		page, pages, first := r.item(i)
		var blk []byte
		if r.byPage {
			blk, err = r.blockAt(page)
			if err == nil {
				err = r.verifyBlock(blockName{n: i}, page*PageSize, pages, blk, first, true)
			}
		} else {
			blk, err = r.block(i)
		}
		if err != nil {
			return err
		}
		for j := range uint64(u16(blk, 8)) {
			at := entryAt(blk, j)
			key := entryKey(blk, at)
			fb, fat, ok, err := r.find(key)
			if err != nil {
				return err
			}
			if !ok || &fb[0] != &blk[0] || fat != at {
				return r.corrupt(page*PageSize+at, "key %q is not found at its place through the hash index", key)
			}
			n++
		}
	}
	if n != r.meta.Count {
		return r.corrupt(uint64(len(r.b))-FooterSize, "%d entries in the blocks, the footer says %d", n, r.meta.Count)
	}
	var used uint64
	for p := range r.hashPages {
		pg, err := r.hashPage(p)
		if err != nil {
			return err
		}
		for j := range uint64(slotsPerPage) {
			if u64(pg, hashPageHead+8*j) != 0 {
				used++
			}
		}
	}
	if used != n {
		return r.corrupt(r.hashOff, "%d hash slots in use for %d entries", used, n)
	}
	_, err = r.Leases()
	return err
}

// ReadMeta reads only the meta frame of the image in file name (its
// first record: covered segment and revision), checking its checksum and
// nothing else.
func ReadMeta(fsys vfs.FS, name string) (snapshot.Meta, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return snapshot.Meta{}, err
	}
	defer f.Close()
	var p [fileHeaderSize + metaFrameSize]byte
	if n, err := f.ReadAt(p[:], 0); n < len(p) {
		if err == nil || err == io.EOF {
			return snapshot.Meta{}, &corrupt.Error{Err: snapshot.ErrCorrupt, File: name, Offset: int64(n), Reason: "file cut short"}
		}
		return snapshot.Meta{}, err
	}
	r := &Reader{mapped: &mapped{name: name, b: p[:]}}
	if [6]byte(p[:6]) != magic {
		return snapshot.Meta{}, r.corrupt(0, "bad magic")
	}
	if v := u16(p[:], 6); !isImageVersion(v) {
		return snapshot.Meta{}, errOtherVersion(name, v)
	}
	fr := p[fileHeaderSize:]
	if crc(fr[4:]) != u32(fr, 0) || u32(fr, 4) != metaPayloadSize || fr[8] != frameMeta {
		return snapshot.Meta{}, r.corrupt(fileHeaderSize, "bad meta frame")
	}
	return snapshot.Meta{Covered: wal.SegmentNum(u64(fr, 9)), Revision: record.Revision(u64(fr, 17))}, nil
}

// endsChunk is how many data pages share one array of a pageEnds.
const endsChunk = 1024

// pageEnds is a uint32 per data page, 0 until stored, kept in arrays of
// endsChunk made at their first store: an open allocates a pointer per
// 4 MiB of data pages, where a table of 4 bytes a page (160 KiB for 1M
// keys) cost a new process's open of the image 2–3 µs of its 30, and a
// one-shot process looks up a few blocks.
type pageEnds struct {
	chunks []atomic.Pointer[[endsChunk]atomic.Uint32]
}

func newPageEnds(pages uint64) pageEnds {
	return pageEnds{chunks: make([]atomic.Pointer[[endsChunk]atomic.Uint32], (pages+endsChunk-1)/endsChunk)}
}

// load returns the value of page i (0-based), 0 when none was stored.
func (e *pageEnds) load(i uint64) uint32 {
	c := e.chunks[i/endsChunk].Load()
	if c == nil {
		return 0
	}
	return c[i%endsChunk].Load()
}

// store sets the value of page i. Stores may race: two that make the
// same array keep the first, and the one that lost stores into it.
func (e *pageEnds) store(i uint64, v uint32) {
	p := &e.chunks[i/endsChunk]
	c := p.Load()
	if c == nil {
		c = new([endsChunk]atomic.Uint32)
		if !p.CompareAndSwap(nil, c) {
			c = p.Load()
		}
	}
	c[i%endsChunk].Store(v)
}
