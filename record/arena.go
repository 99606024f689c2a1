package record

import (
	"cmp"
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/kvstore/kv/internal/mem"
)

// A Map keeps its entries in an arena: large byte slices, allocated from
// the Go heap and free of pointers, into which each new version of a key
// is appended as
//
//	create revision u64 | mod revision u64 | version u64 | key length u32 | key | value length u32 | value
//
// (little-endian, no alignment: the layout of a snapshot's entry frame).
// The tree holds refs, pointers to the start of such entries; the index
// holds locs (below), which are not pointers. The garbage collector then
// sees one object per chunk instead of two per key, and a key costs its
// bytes plus 32, where a heap-allocated Entry and its bytes cost about 90
// more.
//
// Bytes appended are never changed afterwards, with two exceptions, both
// in a map deferred while empty (see Map.Defer), which no one else reads:
// a put of a value of the same length overwrites it in place, and an entry
// replaced or deleted gets version 0 (markDead). So an Entry made from a ref (its Key and Value point
// into the chunk) stays valid for as long as it is held, and it keeps its
// chunk alive. Versions that were replaced or deleted are dead bytes;
// when they outgrow half the live ones, the map copies the live entries
// of the chunk most dead to the chunk being filled and lets the old one
// go (see Map.maybeCompact).
type ref = unsafe.Pointer

const entryFixed = 32 // the revisions, the version and the two lengths

// Chunk sizes: the defaults of tuning.minChunk, maxChunk and ownChunk.
const (
	defaultMinChunk = 4 << 10  // a small map stays small
	defaultMaxChunk = 1 << 20  // chunks double up to this size; offBits bounds it
	defaultOwnChunk = 64 << 10 // entries at least this big get an allocation of their own
)

// chunk is one allocation of the arena.
type chunk struct {
	b     []byte  // len is what is used
	base  uintptr // the address of b[0], for chunkOf
	live  int64   // bytes of the entries in b that are live
	moved int64   // bytes of live entries copied out by an evacuation
	id    uint64  // its number in arena.byID, for locs
}

// A loc says where an entry is without a pointer: its chunk's number and
// its offset in the chunk. The index stores locs.
const (
	offBits = 20 // chunks are at most 1 MiB; an entry with a chunk of its own is at offset 0
	idBits  = 22 // 4M chunks: 4 TiB of 1 MiB chunks, or 4M entries of 64 KiB or more
	locBits = offBits + idBits
	locMask = 1<<locBits - 1
	offMask = 1<<offBits - 1
)

// arena hands out the space for new entries and keeps count of which are
// live, chunk by chunk, so that the chunks mostly dead can be evacuated.
type arena struct {
	tune   *tuning  // the map's sizes and thresholds, shared with its clones
	cur    *chunk   // the chunk being filled
	chunks []*chunk // every chunk, by base address
	byID   []*chunk // every chunk, by number; nil where none is
	freeID []uint64 // numbers of dropped chunks, to be given again
	next   int      // the size of the next chunk
	live   int64    // bytes of live entries
	dead   int64    // bytes of entries replaced or deleted, not yet evacuated
}

// alloc returns n bytes of fresh space and the chunk they are in. Every
// chunk keeps one byte spare at its end, so that a pointer just past an
// entry (an empty value at the end of a chunk) still points into it.
func (a *arena) alloc(n int) ([]byte, uint64) {
	a.live += int64(n)
	if n >= a.tune.ownChunk {
		c := a.newChunk(n)
		c.b = c.b[:n]
		c.live = int64(n)
		return c.b, c.id << offBits
	}
	if a.cur == nil || cap(a.cur.b)-len(a.cur.b) < n+1 {
		size := max(a.next, a.tune.minChunk)
		for size < n+1 {
			size *= 2
		}
		a.next = min(size*2, a.tune.maxChunk)
		a.cur = a.newChunk(size - 1)
	}
	c := a.cur
	l := len(c.b)
	c.b = c.b[:l+n]
	c.live += int64(n)
	return c.b[l : l+n : l+n], c.id<<offBits | uint64(l)
}

// newChunk allocates a chunk for size bytes (and the spare one) and adds
// it to the chunks.
func (a *arena) newChunk(size int) *chunk {
	b := make([]byte, 0, size+1)
	mem.Populate(b) // it will be filled: one system call, not a fault a page
	c := &chunk{b: b, base: uintptr(unsafe.Pointer(unsafe.SliceData(b)))}
	if len(a.byID) == 0 {
		a.byID = append(a.byID, nil) // number 0 means no chunk
	}
	if n := len(a.freeID); n > 0 {
		c.id, a.freeID = a.freeID[n-1], a.freeID[:n-1]
	} else {
		if len(a.byID) > 1<<idBits-1 {
			panic("record: more than 4M arena chunks")
		}
		c.id = uint64(len(a.byID))
		a.byID = append(a.byID, nil)
	}
	a.byID[c.id] = c
	i, _ := slices.BinarySearchFunc(a.chunks, c.base, func(c *chunk, base uintptr) int { return cmp.Compare(c.base, base) })
	a.chunks = slices.Insert(a.chunks, i, c)
	return c
}

// chunkOf returns the index in a.chunks of the chunk holding p, or -1 when
// p is not in this arena (an entry of the map a clone came from, or of
// chunks evacuated already).
func (a *arena) chunkOf(p ref) int {
	addr := uintptr(p)
	i, found := slices.BinarySearchFunc(a.chunks, addr, func(c *chunk, addr uintptr) int { return cmp.Compare(c.base, addr) })
	if !found {
		i--
	}
	if i < 0 || addr >= a.chunks[i].base+uintptr(len(a.chunks[i].b)) {
		return -1
	}
	return i
}

// kill counts the entry at p dead: replaced or deleted.
func (a *arena) kill(p ref) {
	if i := a.chunkOf(p); i >= 0 {
		n := int64(refSize(p))
		a.chunks[i].live -= n
		a.live -= n
		a.dead += n
	}
}

// victim returns the index of the chunk with the most dead bytes, not
// counting the one being filled, or -1 when none has any.
func (a *arena) victim() int {
	best, most := -1, int64(0)
	for i, c := range a.chunks {
		if d := c.deadBytes(); c != a.cur && d > most {
			best, most = i, d
		}
	}
	return best
}

// deadBytes returns the bytes of c's entries replaced or deleted.
func (c *chunk) deadBytes() int64 { return int64(len(c.b)) - c.live - c.moved }

// moved counts an entry of n bytes of c, being evacuated, copied out: its
// bytes will be counted live where the copy goes.
func (a *arena) moved(c *chunk, n int) {
	c.live -= int64(n)
	c.moved += int64(n)
	a.live -= int64(n)
}

// drop removes chunk i, whose live entries have been copied elsewhere.
func (a *arena) drop(i int) {
	c := a.chunks[i]
	a.dead -= c.deadBytes()
	a.live -= c.live // none, once every live entry has moved
	a.chunks = slices.Delete(a.chunks, i, i+1)
	a.byID[c.id] = nil
	a.freeID = append(a.freeID, c.id)
}

// ref returns the ref of the entry at loc.
func (a *arena) ref(loc uint64) ref {
	return unsafe.Add(ref(unsafe.SliceData(a.byID[loc>>offBits].b)), loc&offMask)
}

// locOf returns the loc of p, an entry in chunk c.
func locOf(c *chunk, p ref) uint64 { return c.id<<offBits | uint64(uintptr(p)-c.base) }

// put appends an entry and returns its ref and loc.
func (a *arena) put(key, value []byte, createRev, modRev Revision, version int64) (ref, uint64) {
	b, loc := a.alloc(entryFixed + len(key) + len(value))
	binary.LittleEndian.PutUint64(b, uint64(createRev))
	binary.LittleEndian.PutUint64(b[8:], uint64(modRev))
	binary.LittleEndian.PutUint64(b[16:], uint64(version))
	binary.LittleEndian.PutUint32(b[24:], uint32(len(key)))
	n := 28 + copy(b[28:], key)
	binary.LittleEndian.PutUint32(b[n:], uint32(len(value)))
	copy(b[n+4:], value)
	return ref(&b[0]), loc
}

// copyOf appends a copy of the entry at p and returns its ref and loc.
func (a *arena) copyOf(p ref) (ref, uint64) {
	n := refSize(p)
	b, loc := a.alloc(n)
	copy(b, unsafe.Slice((*byte)(p), n))
	return ref(&b[0]), loc
}

// bytesAt views n bytes of an entry from offset off.
func bytesAt(p ref, off, n int) []byte { return unsafe.Slice((*byte)(unsafe.Add(p, off)), n) }

func refKeyLen(p ref) int { return int(binary.LittleEndian.Uint32(bytesAt(p, 24, 4))) }

// refKey returns the key of the entry at p.
func refKey(p ref) []byte { return bytesAt(p, 28, refKeyLen(p)) }

func refValueLen(p ref) int {
	return int(binary.LittleEndian.Uint32(bytesAt(p, 28+refKeyLen(p), 4)))
}

// refSize returns the bytes the entry at p takes in the arena.
func refSize(p ref) int { return entryFixed + refKeyLen(p) + refValueLen(p) }

// refEntry returns the entry at p, its Key and Value pointing into the
// arena (each with no capacity past its length).
func refEntry(p ref) Entry {
	h := bytesAt(p, 0, 28)
	kl := int(binary.LittleEndian.Uint32(h[24:]))
	vl := int(binary.LittleEndian.Uint32(bytesAt(p, 28+kl, 4)))
	return Entry{
		Key:       bytesAt(p, 28, kl),
		Value:     bytesAt(p, 32+kl, vl),
		CreateRev: Revision(binary.LittleEndian.Uint64(h)),
		ModRev:    Revision(binary.LittleEndian.Uint64(h[8:])),
		Version:   int64(binary.LittleEndian.Uint64(h[16:])),
	}
}

// probe returns a ref to a throwaway entry holding key alone, for looking
// key up in the tree.
func probe(key []byte) ref {
	b := make([]byte, entryFixed+len(key), entryFixed+len(key)+1)
	binary.LittleEndian.PutUint32(b[24:], uint32(len(key)))
	copy(b[28:], key)
	return ref(&b[0])
}
