package record

import (
	"bytes"
	"hash/maphash"
)

// index is a Map's hash index: open addressing with linear probing over
// refs, with 32 bits of each key's hash beside its ref. The stored hash
// makes a mismatch cost no read of the arena, and a rehash read no key at
// all, where a Go map keyed by strings into the arena would re-hash every
// key (a cache miss each) every time it grows.
type index struct {
	slots []slot
	live  int // keys held
	used  int // slots not empty: keys and tombs
	seed  maphash.Seed
}

// slot is one key's place in the index: its ref and hash side by side, so
// that a probe costs one cache miss, not two.
type slot struct {
	p ref    // nil: empty; tomb: deleted
	h uint32 // the low 32 bits of the key's hash
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
	old := x.slots
	x.slots = make([]slot, size)
	x.used = x.live
	mask := uint32(size - 1)
	for _, s := range old {
		if s.p == nil || s.p == tomb {
			continue
		}
		j := s.h & mask
		for x.slots[j].p != nil {
			j = (j + 1) & mask
		}
		x.slots[j] = s
	}
}

func (x *index) hash(key []byte) uint32 { return uint32(maphash.Bytes(x.seed, key)) }

// find returns the slot holding key, or -1.
func (x *index) find(key []byte) int {
	h := x.hash(key)
	mask := uint32(len(x.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		s := &x.slots[j]
		if s.p == nil {
			return -1
		}
		if s.h == h && s.p != tomb && bytes.Equal(refKey(s.p), key) {
			return int(j)
		}
	}
}

// get returns the ref of key, or nil.
func (x *index) get(key []byte) ref {
	if j := x.find(key); j >= 0 {
		return x.slots[j].p
	}
	return nil
}

// insert adds p, whose key the index does not hold.
func (x *index) insert(p ref) {
	if (x.used+1)*maxLoadDen > len(x.slots)*maxLoadNum {
		// Grow, or when tombs fill the slots, only clear them.
		x.resize(max(x.live*2, x.live+1))
	}
	key := refKey(p)
	h := x.hash(key)
	mask := uint32(len(x.slots) - 1)
	j := h & mask
	for x.slots[j].p != nil && x.slots[j].p != tomb {
		j = (j + 1) & mask
	}
	if x.slots[j].p == nil {
		x.used++
	}
	x.slots[j] = slot{p, h}
	x.live++
}

// set makes p the ref of its key and returns the one it replaces (nil if
// the key is new).
func (x *index) set(p ref) ref {
	if j := x.find(refKey(p)); j >= 0 {
		old := x.slots[j].p
		x.slots[j].p = p
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
	old := x.slots[j].p
	x.slots[j].p = tomb
	x.live--
	return old
}

// all calls f with each key's ref.
func (x *index) all(f func(p ref)) {
	for _, s := range x.slots {
		if s.p != nil && s.p != tomb {
			f(s.p)
		}
	}
}
