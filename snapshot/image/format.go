package image

import (
	"hash/crc32"
	"math/bits"
)

// Format constants, part of the on-disk format (FORMAT.md, "Snapshot
// image").
const (
	// Version is the snapshot format version of the images a Writer
	// writes. A Reader reads it and VersionNamedByPosition.
	Version = 4
	// VersionNamedByPosition is the image version before Version, which
	// differs only in its hash slots: they name an entry by its position
	// in its block, which a lookup turns into an offset by reading the
	// block's offset table, where Version's name the offset itself.
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
// the entry in its block (version 4: its offset; version 3: its
// position), the next 32 bits the block, the next bit is 1, and the bits
// above are the top bits of the key's hash.
type slotLayout struct{ pos uint }

var (
	slotsByOffset   = slotLayout{pos: 12} // version 4
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

// blockPages returns the pages of a block holding a single entry of size
// bytes (fixed fields, key and value).
func blockPages(size uint64) uint64 {
	return (blockHeaderSize + 2 + size + PageSize - 1) / PageSize
}

// crc is CRC-32C of b.
func crc(b []byte) uint32 { return crc32.Update(0, castagnoli, b) }
