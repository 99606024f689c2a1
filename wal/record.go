package wal

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// RecordType is the type byte of a record, its first byte. It is part of
// the on-disk format; type 0 is reserved as invalid so that zeroed bytes
// never parse, and every record therefore starts with a non-zero byte.
type RecordType uint8

// Record types, part of the on-disk format.
const (
	TypeInvalid RecordType = 0 // never written; zeros read as this
	TypeHeader  RecordType = 1 // first record of every segment: magic, version, segment, salt
	TypeData    RecordType = 2 // a payload of the caller's, stored scrambled
	TypeSeal    RecordType = 3 // last record of a sealed segment
	TypeMark    RecordType = 4 // empty: says how far the segment was synced when it was written
	maxType     RecordType = TypeMark
)

// String names the type.
func (t RecordType) String() string {
	switch t {
	case TypeHeader:
		return "header"
	case TypeData:
		return "data"
	case TypeSeal:
		return "seal"
	case TypeMark:
		return "mark"
	}
	return "invalid"
}

// Sizes and limits, part of the on-disk format.
const (
	// HeaderSize is the size of a record header.
	HeaderSize = 24
	// segmentHeaderSize is the size of the payload of a TypeHeader record.
	segmentHeaderSize = 24
	// firstRecord is the offset of the record after the segment header.
	firstRecord = HeaderSize + segmentHeaderSize
	// Version is the segment format version this code writes and reads.
	Version = 2
	// keySize is the length of a segment's scrambling key, repeated over
	// a payload.
	keySize = 4096
)

// Tuning defaults (not part of the format).
const (
	// DefaultMaxRecordSize bounds a record's payload by default.
	DefaultMaxRecordSize = 16 << 20
	// DefaultSegmentSize is the size past which a segment is sealed and
	// the next one started.
	DefaultSegmentSize = 64 << 20
)

// segmentMagic opens the payload of every segment header record.
var segmentMagic = [4]byte{'K', 'V', 'W', 'L'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segKey is what a segment's salt determines: the checksum state after
// the salt, which every record's checksums start from, and the key its
// data payloads are scrambled with. A record of another segment, or bytes
// a program wrote as a value, fail both: the salt is random and never
// leaves the segment's header.
//
// The key's 4 KiB are derived at the first scramble (bytes): an open
// whose newest segment holds no data record (the one a checkpoint
// starts, which a reopen reads) and a process that only reads never
// need them, and deriving them into fresh pages was a few microseconds
// of a new process's open.
type segKey struct {
	salt    uint64
	crc0    uint32 // CRC-32C of the salt's 8 bytes
	keyOnce sync.Once
	key     *[keySize]byte // nil until bytes derives it
}

// newSalt returns a random non-zero salt.
func newSalt() uint64 {
	for {
		if s := rand.Uint64(); s != 0 {
			return s
		}
	}
}

// lastKey is the key keyFor made last: an open derives the newest
// segment's key twice, to read the segment and then to write on, and the
// 4 KiB of a key are a few microseconds of a short-lived process's open.
// A segKey is never changed once made.
var lastKey atomic.Pointer[segKey]

// keyFor derives a segment's checksum seed and scrambling key from its
// salt. The key is the output of SplitMix64 seeded with the salt, 8 bytes
// little-endian per step (part of the on-disk format).
func keyFor(salt uint64) *segKey {
	if k := lastKey.Load(); k != nil && k.salt == salt {
		return k
	}
	k := makeKey(salt)
	lastKey.Store(k)
	return k
}

// makeKey is keyFor, without the cache.
func makeKey(salt uint64) *segKey {
	k := &segKey{salt: salt}
	var sb [8]byte
	binary.LittleEndian.PutUint64(sb[:], salt)
	k.crc0 = crc32.Update(0, castagnoli, sb[:])
	return k
}

// bytes returns the scrambling key, derived at the first call.
func (k *segKey) bytes() *[keySize]byte {
	k.keyOnce.Do(func() {
		key := new([keySize]byte)
		x := k.salt
		for i := 0; i < keySize; i += 8 {
			x += 0x9e3779b97f4a7c15
			z := x
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			z ^= z >> 31
			binary.LittleEndian.PutUint64(key[i:], z)
		}
		k.key = key
	})
	return k.key
}

// scramble writes src XOR the key, repeated, into dst (len(dst) >=
// len(src)). It is its own inverse.
func (k *segKey) scramble(dst, src []byte) {
	if len(src) == 0 {
		return
	}
	key := k.bytes()
	for i := 0; i < len(src); i += keySize {
		subtle.XORBytes(dst[i:], src[i:min(i+keySize, len(src))], key[:])
	}
}

// headerCRC is the checksum of a record header's first 16 bytes.
func (k *segKey) headerCRC(h []byte) uint32 { return crc32.Update(k.crc0, castagnoli, h[:16]) }

// recordCRC is the checksum of a record: its header's first 20 bytes and
// its stored payload.
func (k *segKey) recordCRC(rec []byte) uint32 {
	return crc32.Update(crc32.Update(k.crc0, castagnoli, rec[:20]), castagnoli, rec[HeaderSize:])
}

// appendRecord appends one framed record to buf. A data payload is stored
// scrambled; the others as they are.
//
//	0  uint8  type
//	1  [3]    zero
//	4  uint32 length of the payload
//	8  uint64 synced offset: bytes of this segment durable when written
//	16 uint32 header CRC: CRC-32C of the salt, then bytes [0, 16)
//	20 uint32 record CRC: CRC-32C of the salt, then bytes [0, 20), then the stored payload
//	24 payload
func appendRecord(buf []byte, k *segKey, t RecordType, synced int64, payload []byte) []byte {
	start := len(buf)
	var h [HeaderSize]byte
	h[0] = byte(t)
	binary.LittleEndian.PutUint32(h[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(h[8:], uint64(synced))
	binary.LittleEndian.PutUint32(h[16:], k.headerCRC(h[:]))
	buf = append(buf, h[:]...)
	if t == TypeData {
		buf = append(buf, payload...) // room, overwritten below
		k.scramble(buf[start+HeaderSize:], payload)
	} else {
		buf = append(buf, payload...)
	}
	binary.LittleEndian.PutUint32(buf[start+20:], k.recordCRC(buf[start:]))
	return buf
}

// segmentHeaderPayload is the payload of a segment's first record.
func segmentHeaderPayload(seg SegmentNum, salt uint64) []byte {
	p := make([]byte, segmentHeaderSize)
	copy(p, segmentMagic[:])
	binary.LittleEndian.PutUint16(p[4:], Version)
	binary.LittleEndian.PutUint64(p[8:], uint64(seg))
	binary.LittleEndian.PutUint64(p[16:], salt)
	return p
}

// header is a record header whose header CRC holds.
type header struct {
	typ    RecordType
	length int
	synced int64
}

// plausible reports whether b, the start of a record header (possibly
// shorter than a header), has a valid type for a record after the
// segment header and zero reserved bytes, as far as b goes.
func plausible(b []byte) bool {
	if len(b) > 0 && (RecordType(b[0]) < TypeData || RecordType(b[0]) > maxType) {
		return false
	}
	for i := 1; i < min(len(b), 4); i++ {
		if b[i] != 0 {
			return false
		}
	}
	return true
}

// parseHeader checks the record header at the start of b (at least
// HeaderSize bytes) against the segment's key. It returns a reason when
// the header is not one this segment's writer wrote.
func parseHeader(b []byte, k *segKey) (header, string) {
	if !plausible(b[:4]) {
		if RecordType(b[0]) < TypeData || RecordType(b[0]) > maxType {
			return header{}, "invalid record type"
		}
		return header{}, "reserved header bytes not zero"
	}
	if k.headerCRC(b) != binary.LittleEndian.Uint32(b[16:]) {
		return header{}, "header checksum mismatch"
	}
	synced := binary.LittleEndian.Uint64(b[8:])
	if synced > 1<<62 {
		return header{}, "synced offset out of range"
	}
	return header{typ: RecordType(b[0]), length: int(binary.LittleEndian.Uint32(b[4:])), synced: int64(synced)}, ""
}

// checkRecord checks the record CRC of rec, a whole record whose header
// parseHeader accepted.
func checkRecord(rec []byte, k *segKey) string {
	if k.recordCRC(rec) != binary.LittleEndian.Uint32(rec[20:]) {
		return "checksum mismatch"
	}
	return ""
}

func allZero(b []byte) bool {
	for len(b) >= 64 {
		if !bytes.Equal(b[:64], zeros64[:]) {
			return false
		}
		b = b[64:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

var zeros64 [64]byte
