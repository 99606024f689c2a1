package record

import (
	"bytes"
	"hash/maphash"
	"unsafe"

	"github.com/kvstore/kv/internal/mem"
)

// index is a Map's hash index: open addressing with linear probing over
// 8-byte slots, each holding where a key's entry is (its chunk's number
// and its offset in the chunk, see arena.loc) and 22 bits of the key's
// hash. The slots hold no pointers, so the garbage collector never scans
// them (the arena's chunk table keeps the chunks alive), and a key costs
// 8 bytes a slot. The stored hash makes a mismatch cost no read of the
// arena, and a rehash of up to 4M slots read no key.
type index struct {
	a     *arena
	slots []uint64 // 0: empty; tombSlot: deleted; else hash<<locBits | loc
	live  int      // keys held
	used  int      // slots not empty: keys and tombs
	seed  maphash.Seed
}

// tombSlot marks a slot whose key was deleted: a search goes on past it.
// Chunk 0 does not exist, so no entry is there.
const tombSlot = 1

const (
	hashBits = 64 - locBits
	hashMask = 1<<hashBits - 1
)

// defaultStoredHashSlots is the largest index whose rehash can place keys
// by the hash bits stored in their slots: the default of
// tuning.storedHashSlots.
const defaultStoredHashSlots = 1 << hashBits

// maxLoad is the share of slots, keys and tombs, past which the index
// grows: linear probing stays short below it.
const maxLoadNum, maxLoadDen = 3, 4

func newIndex(a *arena, n int) *index {
	x := &index{a: a, seed: maphash.MakeSeed()}
	x.resize(n)
	return x
}

// resize makes room for n keys and reinserts the ones held.
func (x *index) resize(n int) {
	size := 8
	for size*maxLoadNum/maxLoadDen < n+1 {
		size *= 2
	}
	old := x.slots
	x.slots = make([]uint64, size)
	mem.PopulateSlice(x.slots)
	x.used = x.live
	mask := uint64(size - 1)
	for _, s := range old {
		if s == 0 || s == tombSlot {
			continue
		}
		h := s >> locBits
		if size > x.a.tune.storedHashSlots {
			h = x.hash(refKey(x.a.ref(s & locMask)))
		}
		j := h & mask
		for x.slots[j] != 0 {
			j = (j + 1) & mask
		}
		x.slots[j] = s
	}
}

func (x *index) hash(key []byte) uint64 { return maphash.Bytes(x.seed, key) }

// find returns the slot holding key, or -1.
func (x *index) find(key []byte) int { return x.findHashed(key, x.hash(key)) }

// findHashed is find for a key whose hash is h.
func (x *index) findHashed(key []byte, h uint64) int {
	tag := h & hashMask
	slots := x.slots
	mask := uint64(len(slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		s := slots[j]
		if s == 0 {
			return -1
		}
		if s>>locBits == tag && s != tombSlot && bytes.Equal(refKey(x.a.ref(s&locMask)), key) {
			return int(j)
		}
	}
}

// refAt returns the ref of the key in slot j.
func (x *index) refAt(j int) ref { return x.a.ref(x.slots[j] & locMask) }

// locAt returns where the entry of the key in slot j is.
func (x *index) locAt(j int) uint64 { return x.slots[j] & locMask }

// setAt points slot j, which holds a key, at a new entry of the same key.
func (x *index) setAt(j int, loc uint64) { x.slots[j] = x.slots[j]&^locMask | loc }

// get returns the ref of key, or nil.
func (x *index) get(key []byte) ref {
	if j := x.find(key); j >= 0 {
		return x.refAt(j)
	}
	return nil
}

// insert adds the entry at p (at loc), whose key the index does not hold.
func (x *index) insert(p ref, loc uint64) { x.insertHashed(loc, x.hash(refKey(p))) }

// insertHashed is insert for an entry whose key's hash is h.
func (x *index) insertHashed(loc uint64, h uint64) {
	if (x.used+1)*maxLoadDen > len(x.slots)*maxLoadNum {
		// Grow, or when tombs fill the slots, only clear them.
		x.resize(max(x.live*2, x.live+1))
	}
	mask := uint64(len(x.slots) - 1)
	j := h & mask
	for x.slots[j] != 0 && x.slots[j] != tombSlot {
		j = (j + 1) & mask
	}
	if x.slots[j] == 0 {
		x.used++
	}
	x.slots[j] = (h&hashMask)<<locBits | loc
	x.live++
}

// set makes the entry at p (at loc) its key's, and returns the ref it
// replaces (nil if the key is new).
func (x *index) set(p ref, loc uint64) ref { return x.setHashed(p, loc, x.hash(refKey(p))) }

// setHashed is set for an entry whose key's hash is h.
func (x *index) setHashed(p ref, loc uint64, h uint64) ref {
	if j := x.findHashed(refKey(p), h); j >= 0 {
		old := x.refAt(j)
		x.setAt(j, loc)
		return old
	}
	x.insertHashed(loc, h)
	return nil
}

// prefetch starts loading the slot where a search for hash h starts into
// the cache, and returns at once (see Map.Load).
func (x *index) prefetch(h uint64) {
	mem.Prefetch(uintptr(unsafe.Pointer(&x.slots[h&uint64(len(x.slots)-1)])))
}

// remove deletes key and returns its ref, or nil if it was absent.
func (x *index) remove(key []byte) ref {
	j := x.find(key)
	if j < 0 {
		return nil
	}
	old := x.refAt(j)
	x.slots[j] = tombSlot
	x.live--
	return old
}

// all calls f with each key's ref.
func (x *index) all(f func(p ref)) {
	for _, s := range x.slots {
		if s != 0 && s != tombSlot {
			f(x.a.ref(s & locMask))
		}
	}
}
