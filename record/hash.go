package record

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// Hash is a map's content hash: SHA-256 of its entries in key order, each
// as its create revision, mod revision, version, key and value
// (FORMAT.md, "Content hash"). Two maps have the same Hash when every key
// has the same value, revisions and version in both; the map's own
// revision is not in it.
type Hash [sha256.Size]byte

// String formats h as 64 lower-case hexadecimal digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// hashBuf is how many bytes a Hasher gathers before it hands them to
// SHA-256: one call per entry would cost more than the hashing of a small
// entry.
const hashBuf = 64 << 10

// Hasher computes a Hash from entries added in ascending key order.
type Hasher struct {
	h   hash.Hash
	buf []byte
}

// NewHasher returns a Hasher of the empty map.
func NewHasher() *Hasher { return &Hasher{h: sha256.New(), buf: make([]byte, 0, hashBuf)} }

// Add adds e, whose key must be greater than every key added before.
// Part of the format of the content hash: the fields and their order are
// those of a snapshot entry frame's payload (FORMAT.md, "Snapshot").
func (h *Hasher) Add(e *Entry) {
	b := h.buf
	b = binary.LittleEndian.AppendUint64(b, uint64(e.CreateRev))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.ModRev))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Version))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Key)))
	b = append(b, e.Key...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Value)))
	b = append(b, e.Value...)
	if len(b) >= hashBuf {
		h.h.Write(b)
		b = b[:0]
	}
	h.buf = b
}

// Sum returns the hash of the entries added so far.
func (h *Hasher) Sum() Hash {
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
	var out Hash
	h.h.Sum(out[:0])
	return out
}

// Hash returns the content hash of m. It reads the ordered tree, as All
// does: call it on a clone to hash a map that changes meanwhile.
func (m *Map) Hash() Hash {
	h := NewHasher()
	for e := range m.All(nil, nil) {
		h.Add(e)
	}
	return h.Sum()
}
