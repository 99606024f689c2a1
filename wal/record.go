package wal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// RecordType is the type byte of a record. It is part of the on-disk
// format; type 0 is reserved as invalid so that zeroed bytes never parse.
type RecordType uint8

// Record types, part of the on-disk format.
const (
	TypeInvalid RecordType = 0 // never written; zeros read as this
	TypeHeader  RecordType = 1 // first record of every segment: magic, version, segment
	TypeData    RecordType = 2 // a payload of the caller's
	TypeSeal    RecordType = 3 // last record of a sealed segment
	maxType     RecordType = TypeSeal
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
	}
	return "invalid"
}

// Sizes and limits, part of the on-disk format.
const (
	// HeaderSize is the size of a record header.
	HeaderSize = 24
	// segmentHeaderSize is the size of the payload of a TypeHeader record.
	segmentHeaderSize = 16
	// Version is the segment format version this code writes and reads.
	Version = 1
	// DefaultMaxRecordSize bounds a record's payload by default.
	DefaultMaxRecordSize = 16 << 20
	// DefaultSegmentSize is the size past which a segment is sealed and
	// the next one started.
	DefaultSegmentSize = 64 << 20
)

// segmentMagic opens the payload of every segment header record.
var segmentMagic = [4]byte{'K', 'V', 'W', 'L'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends one framed record to buf.
//
//	0  uint32 CRC-32C of bytes [4, 24+length)
//	4  uint32 length of the payload
//	8  uint8  type
//	9  [3]    zero
//	12 uint32 segment number
//	16 uint64 synced offset: bytes of this segment durable when written
//	24 payload
func appendRecord(buf []byte, t RecordType, seg SegmentNum, synced int64, payload []byte) []byte {
	start := len(buf)
	var h [HeaderSize]byte
	binary.LittleEndian.PutUint32(h[4:], uint32(len(payload)))
	h[8] = byte(t)
	binary.LittleEndian.PutUint32(h[12:], uint32(seg))
	binary.LittleEndian.PutUint64(h[16:], uint64(synced))
	buf = append(buf, h[:]...)
	buf = append(buf, payload...)
	crc := crc32.Update(0, castagnoli, buf[start+4:])
	binary.LittleEndian.PutUint32(buf[start:], crc)
	return buf
}

// segmentHeaderPayload is the payload of a segment's first record.
func segmentHeaderPayload(seg SegmentNum) []byte {
	p := make([]byte, segmentHeaderSize)
	copy(p, segmentMagic[:])
	binary.LittleEndian.PutUint16(p[4:], Version)
	binary.LittleEndian.PutUint64(p[8:], uint64(seg))
	return p
}

// parsed is one record read back from a segment.
type parsed struct {
	typ     RecordType
	synced  int64
	payload []byte
	size    int // header plus payload
}

// parseRecord parses the record at the start of b, which belongs to
// segment seg. It returns a reason when the bytes are not a valid record.
func parseRecord(b []byte, seg SegmentNum, maxRecord int) (parsed, string) {
	if len(b) < HeaderSize {
		return parsed{}, "incomplete record header"
	}
	t := RecordType(b[8])
	if t == TypeInvalid || t > maxType {
		return parsed{}, "invalid record type"
	}
	if b[9] != 0 || b[10] != 0 || b[11] != 0 {
		return parsed{}, "reserved header bytes not zero"
	}
	if SegmentNum(binary.LittleEndian.Uint32(b[12:])) != seg&maxSegment {
		return parsed{}, "record belongs to another segment"
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if int64(n) > int64(maxRecord) {
		return parsed{}, "record length past the maximum"
	}
	end := HeaderSize + int(n)
	if len(b) < end {
		return parsed{}, "incomplete record"
	}
	if crc32.Update(0, castagnoli, b[4:end]) != binary.LittleEndian.Uint32(b) {
		return parsed{}, "checksum mismatch"
	}
	synced := binary.LittleEndian.Uint64(b[16:])
	if synced > 1<<62 {
		return parsed{}, "synced offset out of range"
	}
	return parsed{typ: t, synced: int64(synced), payload: b[HeaderSize:end:end], size: end}, ""
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
