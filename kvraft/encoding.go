package kvraft

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/hashicorp/raft"
)

// The encoding of a raft.Log as a kv value: part of the on-disk format,
// specified byte by byte in README.md ("Encoding").
const (
	// logVersion is the first byte of every encoded log entry; 0 is
	// reserved as invalid.
	logVersion = 1
	// flagAppendedAt says that the entry's AppendedAt is stored (it is
	// not the zero time).
	flagAppendedAt = 1 << 0
	// headerSize is version, type, flags, term and index.
	headerSize = 1 + 1 + 1 + 8 + 8
	// timeSize is AppendedAt's seconds (int64) and nanoseconds (uint32).
	timeSize = 8 + 4
)

// Key prefixes in the kv store: part of the on-disk format.
const (
	// logPrefix starts a log entry's key, followed by its index as 8
	// big-endian bytes, so that key order is index order.
	logPrefix = 'l'
	// stablePrefix starts a stable-store key, followed by the key as
	// raft gave it.
	stablePrefix = 's'
)

// logKey returns the kv key of log index i.
func logKey(i uint64) []byte {
	k := make([]byte, 9)
	k[0] = logPrefix
	binary.BigEndian.PutUint64(k[1:], i)
	return k
}

// keyIndex returns the index of a log key, and whether it is one.
func keyIndex(k []byte) (uint64, bool) {
	if len(k) != 9 || k[0] != logPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// stableKey returns the kv key of stable-store key k.
func stableKey(k []byte) []byte {
	return append([]byte{stablePrefix}, k...)
}

// EncodedSize returns the length of AppendLog's encoding of l.
func EncodedSize(l *raft.Log) int {
	n := headerSize
	if !l.AppendedAt.IsZero() {
		n += timeSize
	}
	n += uvarintLen(uint64(len(l.Data))) + len(l.Data)
	n += uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
	return n
}

// AppendLog appends the encoding of l (README.md, "Encoding") to dst and
// returns the extended slice. The encoding keeps every field of raft.Log
// but AppendedAt's location and monotonic clock reading, which no store
// can keep: DecodeLog gives AppendedAt in time.Local, equal (time.Equal)
// to the one encoded.
func AppendLog(dst []byte, l *raft.Log) []byte {
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	dst = append(dst, logVersion, byte(l.Type), flags)
	dst = binary.LittleEndian.AppendUint64(dst, l.Term)
	dst = binary.LittleEndian.AppendUint64(dst, l.Index)
	if flags&flagAppendedAt != 0 {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(l.AppendedAt.Unix()))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(l.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	return dst
}

// DecodeLog decodes an encoded log entry (README.md, "Encoding") into l,
// overwriting every field. Data and Extensions are copies, in one
// allocation, that l's owner may keep and change; a zero length decodes as
// nil. It never panics: malformed input returns a *CorruptError matching
// ErrCorrupt (or ErrVersion for a newer format version) and leaves l
// unspecified. Every input it accepts, AppendLog encodes to the same
// bytes.
func DecodeLog(b []byte, l *raft.Log) error {
	bad := func(off int, reason string) error {
		return &CorruptError{Offset: off, Reason: reason, Err: ErrCorrupt}
	}
	if len(b) < 1 {
		return bad(0, "empty value")
	}
	switch v := b[0]; {
	case v == 0:
		return bad(0, "version 0 is reserved as invalid")
	case v > logVersion:
		return &CorruptError{Offset: 0, Reason: "version " + itoa(uint64(v)), Err: ErrVersion}
	}
	if len(b) < headerSize {
		return bad(len(b), "header cut short")
	}
	flags := b[2]
	if flags&^flagAppendedAt != 0 {
		return bad(2, "unknown flags")
	}
	l.Type = raft.LogType(b[1])
	l.Term = binary.LittleEndian.Uint64(b[3:])
	l.Index = binary.LittleEndian.Uint64(b[11:])
	off := headerSize
	l.AppendedAt = time.Time{}
	if flags&flagAppendedAt != 0 {
		if len(b)-off < timeSize {
			return bad(off, "AppendedAt cut short")
		}
		sec := int64(binary.LittleEndian.Uint64(b[off:]))
		nsec := binary.LittleEndian.Uint32(b[off+8:])
		if nsec >= 1e9 {
			return bad(off+8, "nanoseconds past a second")
		}
		t := time.Unix(sec, int64(nsec))
		if t.IsZero() {
			return bad(off, "AppendedAt flagged but the zero time")
		}
		l.AppendedAt = t
		off += timeSize
	}
	dataLen, n, err := readLen(b, off)
	if err != nil {
		return err
	}
	dataOff := off + n
	if uint64(len(b)-dataOff) < dataLen {
		return bad(off, "Data longer than the value")
	}
	off = dataOff + int(dataLen)
	extLen, n, err := readLen(b, off)
	if err != nil {
		return err
	}
	extOff := off + n
	if uint64(len(b)-extOff) != extLen {
		if uint64(len(b)-extOff) < extLen {
			return bad(off, "Extensions longer than the value")
		}
		return bad(extOff+int(extLen), "bytes after Extensions")
	}
	l.Data, l.Extensions = nil, nil
	if dataLen+extLen > 0 {
		buf := make([]byte, dataLen+extLen)
		copy(buf, b[dataOff:dataOff+int(dataLen)])
		copy(buf[dataLen:], b[extOff:])
		if dataLen > 0 {
			l.Data = buf[:dataLen:dataLen]
		}
		if extLen > 0 {
			l.Extensions = buf[dataLen:]
		}
	}
	return nil
}

// readLen reads the minimal uvarint at b[off:] and returns it and its
// length: a longer encoding than AppendUvarint's is refused, so that the
// encoding of every entry is unique.
func readLen(b []byte, off int) (uint64, int, error) {
	v, n := binary.Uvarint(b[off:])
	switch {
	case n == 0:
		return 0, 0, &CorruptError{Offset: off, Reason: "length cut short", Err: ErrCorrupt}
	case n < 0:
		return 0, 0, &CorruptError{Offset: off, Reason: "length overflows 64 bits", Err: ErrCorrupt}
	case n != uvarintLen(v):
		return 0, 0, &CorruptError{Offset: off, Reason: "length not minimally encoded", Err: ErrCorrupt}
	case v > math.MaxInt32:
		return 0, 0, &CorruptError{Offset: off, Reason: "length past 2 GiB", Err: ErrCorrupt}
	}
	return v, n, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
