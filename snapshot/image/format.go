package image

import (
	"hash/crc32"
	"math/bits"
)

// Format constants, part of the on-disk format (FORMAT.md, "Snapshot
// image").
const (
	// Version is the snapshot format version of the images a Writer
	// writes. A Reader reads it, VersionBlockNumbered and
	// VersionNamedByPosition.
	Version = 5
	// VersionBlockNumbered is the image version before Version. Its hash
	// slots name an entry's block by its number, which a lookup turns
	// into pages through the block index, where Version's name the
	// block's first page; and one checksum covers its lease section and
	// block index, which an open therefore reads and checks whole, where
	// Version has a checksum per page of them, checked on first use.
	VersionBlockNumbered = 4
	// VersionNamedByPosition is the image version before
	// VersionBlockNumbered, which differs from it only in its hash
	// slots: they name an entry by its position in its block, which a
	// lookup turns into an offset by reading the block's offset table,
	// where later versions' name the offset itself.
	VersionNamedByPosition = 3
	// PageSize is the unit of the file's layout: blocks, the hash
	// index's pages and the alignment of sections.
	PageSize = 4096
	// FooterSize is the footer's length, at the end of the file.
	FooterSize = 72

	fileHeaderSize  = 8  // magic and version
	metaFrameSize   = 25 // CRC, length, type, covered, revision
	metaPayloadSize = 16
	frameMeta       = 1 // the meta frame's type, as in versions 1 and 2

	blockHeaderSize = 12  // CRC, pages, count, zero
	entryFixed      = 32  // create, mod, version, key length, value length
	maxPerBlock     = 120 // (PageSize - blockHeaderSize) / (2 + entryFixed)
	maxBlocks       = 1 << 32
	// maxDataPages bounds D in Version: a slot names a block's first
	// page in 32 bits, and the page after the last block fits them too.
	maxDataPages = 1<<32 - 2

	itemSize      = 16 // a block index item: first page, key offset, key length
	leaseFixed    = 28 // id, ttl, deadline, key count
	slotsPerPage  = 511
	hashPageHead  = 8 // CRC and zeros
	slotBlockMask = 1<<32 - 1
	// minEntryAt is the lowest offset of an entry in a block: after the
	// header and an offset table of at least one entry.
	minEntryAt = blockHeaderSize + 2
)

// slotLayout is where a hash slot keeps its fields: bits 0 .. pos-1 name
// the entry in its block (versions 4 and 5: its offset; version 3: its
// position), the next 32 bits the block (version 5: its first page;
// versions 3 and 4: its number), the next bit is 1, and the bits above
// are the top bits of the key's hash.
type slotLayout struct{ pos uint }

var (
	slotsByOffset   = slotLayout{pos: 12} // versions 4 and 5
	slotsByPosition = slotLayout{pos: 8}  // version 3
)

func (l slotLayout) occupied() uint64 { return 1 << (l.pos + 32) }
func (l slotLayout) tagShift() uint   { return l.pos + 33 }

// slot returns the slot of an entry whose key hashes to h.
func (l slotLayout) slot(h, block, pos uint64) uint64 {
	return h>>l.tagShift()<<l.tagShift() | l.occupied() | block<<l.pos | pos
}

// split returns the block and the entry's offset or position that slot
// s names.
func (l slotLayout) split(s uint64) (block, pos uint64) {
	return (s >> l.pos) & slotBlockMask, s & (1<<l.pos - 1)
}

var (
	magic      = [6]byte{'K', 'V', 'S', 'N', 'A', 'P'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// hashPages returns P, the hash index's pages for n entries: the fewest,
// and at least one, that keep three slots in four or fewer in use.
func hashPages(n uint64) uint64 {
	const per = 3 * slotsPerPage
	p := (4*n + per - 1) / per
	return max(p, 1)
}

// probeStart returns the slot where the probe for hash h starts among n.
func probeStart(h, n uint64) uint64 {
	hi, _ := bits.Mul64(h<<24, n)
	return hi
}

// sectionLayout returns where the parts after the data blocks of an
// image of version v lie, for D data pages (the section starting at
// 4096·(1+D)) and a lease section and block index of leaseLen and idxLen
// bytes: the section's end, the end of the page checksum table after it
// (version 5; the section's end before), and H, the hash index's offset.
func sectionLayout(v uint16, dpages, leaseLen, idxLen uint64) (secEnd, tabEnd, hashOff uint64) {
	secEnd = PageSize*(1+dpages) + leaseLen + idxLen
	tabEnd = secEnd
	if v == Version {
		tabEnd += 4 * sectionPages(leaseLen+idxLen)
	}
	return secEnd, tabEnd, (tabEnd + PageSize - 1) / PageSize * PageSize
}

// sectionPages returns the pages a section of n bytes starts on, as
// many as the page checksum table of version 5 holds.
func sectionPages(n uint64) uint64 { return (n + PageSize - 1) / PageSize }

// blockPages returns the pages of a block holding a single entry of size
// bytes (fixed fields, key and value).
func blockPages(size uint64) uint64 {
	return (blockHeaderSize + 2 + size + PageSize - 1) / PageSize
}

// crc is CRC-32C of b.
func crc(b []byte) uint32 { return crc32.Update(0, castagnoli, b) }
