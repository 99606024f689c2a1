package record

import (
	"bytes"
	"hash/maphash"
	"unsafe"
)

// index is a Map's hash index: open addressing with linear probing over
// refs, with 32 bits of each key's hash beside its ref. The stored hash
// makes a mismatch cost no read of the arena, and a rehash read no key at
// all, where a Go map keyed by strings into the arena would re-hash every
// key (a cache miss each) every time it grows.
type index struct {
	refs   []ref    // nil: empty; tomb: deleted
	hashes []uint32 // the low 32 bits of the key's hash
	live   int      // keys held
	used   int      // slots not empty: keys and tombs
	seed   maphash.Seed
}

// tomb marks a slot whose key was deleted: a search goes on past it.
var tomb = ref(new(byte))

// maxLoad is the share of slots, keys and tombs, past which the index
// grows: linear probing stays short below it.
const maxLoadNum, maxLoadDen = 3, 4

func newIndex(n int) *index {
	x := &index{seed: maphash.MakeSeed()}
	x.resize(n)
	return x
}

// resize makes room for n keys and reinserts the ones held.
func (x *index) resize(n int) {
	size := 8
	for size*maxLoadNum/maxLoadDen < n+1 {
		size *= 2
	}
	refs, hashes := x.refs, x.hashes
	x.refs, x.hashes = make([]ref, size), make([]uint32, size)
	x.used = x.live
	mask := uint32(size - 1)
	for i, p := range refs {
		if p == nil || p == tomb {
			continue
		}
		h := hashes[i]
		j := h & mask
		for x.refs[j] != nil {
			j = (j + 1) & mask
		}
		x.refs[j], x.hashes[j] = p, h
	}
}

func (x *index) hash(key []byte) uint32 { return uint32(maphash.Bytes(x.seed, key)) }

// find returns the slot holding key, or -1.
func (x *index) find(key []byte) int {
	h := x.hash(key)
	mask := uint32(len(x.refs) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		p := x.refs[j]
		if p == nil {
			return -1
		}
		if x.hashes[j] == h && p != tomb && bytes.Equal(refKey(p), key) {
			return int(j)
		}
	}
}

// get returns the ref of key, or nil.
func (x *index) get(key []byte) ref {
	if j := x.find(key); j >= 0 {
		return x.refs[j]
	}
	return nil
}

// insert adds p, whose key the index does not hold.
func (x *index) insert(p ref) {
	if (x.used+1)*maxLoadDen > len(x.refs)*maxLoadNum {
		// Grow, or when tombs fill the slots, only clear them.
		x.resize(max(x.live*2, x.live+1))
	}
	key := refKey(p)
	h := x.hash(key)
	mask := uint32(len(x.refs) - 1)
	j := h & mask
	for x.refs[j] != nil && x.refs[j] != tomb {
		j = (j + 1) & mask
	}
	if x.refs[j] == nil {
		x.used++
	}
	x.refs[j], x.hashes[j] = p, h
	x.live++
}

// set makes p the ref of its key and returns the one it replaces (nil if
// the key is new).
func (x *index) set(p ref) ref {
	if j := x.find(refKey(p)); j >= 0 {
		old := x.refs[j]
		x.refs[j] = p
		return old
	}
	x.insert(p)
	return nil
}

// remove deletes key and returns its ref, or nil if it was absent.
func (x *index) remove(key []byte) ref {
	j := x.find(key)
	if j < 0 {
		return nil
	}
	old := x.refs[j]
	x.refs[j] = tomb
	x.live--
	return old
}

// moved replaces old, the ref of a key, by new (a copy of it).
func (x *index) moved(old, new ref) {
	h := x.hash(refKey(old))
	mask := uint32(len(x.refs) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		if x.refs[j] == old {
			x.refs[j] = new
			return
		}
	}
}

// all calls f with the slot number of each key held.
func (x *index) all(f func(j int, p ref)) {
	for j, p := range x.refs {
		if p != nil && p != tomb {
			f(j, p)
		}
	}
}

// bytes returns the memory the index takes.
func (x *index) bytes() int {
	return len(x.refs) * int(unsafe.Sizeof(ref(nil))+unsafe.Sizeof(uint32(0)))
}
