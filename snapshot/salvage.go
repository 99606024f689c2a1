package snapshot

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/kvstore/kv/internal/window"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Lost is a damaged byte range of a snapshot, and the keys it may have
// held: every key strictly between After and Before in byte order (After
// nil: from the first key; Before nil: to the last).
type Lost struct {
	From, To      int64
	After, Before []byte
}

// Salvaged says what Salvage read of a snapshot file.
type Salvaged struct {
	Size int64
	// Meta is the snapshot's first record, when MetaOK: its frame checks
	// out. Without it the snapshot's revision and coverage are unknown.
	Meta   Meta
	MetaOK bool
	// Entries counts the entries read; Leases the lease frames, which
	// Salvage reads past and does not return.
	Entries, Leases int
	// Complete reports that the snapshot is whole: Read would accept it.
	Complete bool
	// Lost lists the damaged ranges, in order, with the keys each may
	// have held.
	Lost []Lost
	// Disordered counts entries dropped because their key was not above
	// the last one returned (a frame that checks out in the wrong place).
	Disordered int
	// Index lists the damaged ranges of an image (version 3) that hold
	// no entry: its first page, lease section, block index, hash index
	// or footer. No key is lost with them (After and Before are nil),
	// but the file is not Complete.
	Index []Lost
	// LeasesUnknown reports that the snapshot's leases could not be read
	// or counted (an image whose footer or lease section is damaged): it
	// may have held leases, lost with the damage.
	LeasesUnknown bool
}

// Salvage reads every frame of the snapshot file name that checks out,
// whatever damage lies around it, and calls entry with each entry whose
// key comes after the last one returned (a snapshot's entries are in key
// order, so the keys a damaged range held lie between the ones around
// it). It never fails on damage and never changes the file: it reports
// what it could not read. Frames are found past damage by their
// checksum, at every offset; the search gives up, and calls the rest
// damaged, after checksumming the file's size in vain. The entry is lent
// for the call, as in Read.
func Salvage(fsys vfs.FS, name string, entry func(*record.Entry) error) (Salvaged, error) {
	var out Salvaged
	f, err := fsys.Open(name)
	if err != nil {
		return out, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return out, err
	}
	out.Size = fi.Size()
	src := window.New(f, out.Size)
	head, err := src.At(0, fileHeaderSize)
	if err != nil {
		return out, err
	}
	off := int64(0)
	version := uint16(0)
	if len(head) == fileHeaderSize && [6]byte(head[:6]) == magic {
		version = binary.LittleEndian.Uint16(head[6:])
		off = fileHeaderSize
	}
	budget := out.Size // bytes to checksum in vain before giving up
	// frame returns the type and payload of the frame at off if it checks
	// out, and its total length; 0 when it does not.
	frame := func(off int64) (byte, []byte, int64, error) {
		h, err := src.At(off, frameHeaderSize)
		if err != nil || len(h) < frameHeaderSize || h[8] < frameMeta || h[8] > frameLeaseKey {
			return 0, nil, 0, err
		}
		n := int64(binary.LittleEndian.Uint32(h[4:]))
		if n > out.Size-off-frameHeaderSize || n > maxFrame {
			return 0, nil, 0, nil
		}
		sum := binary.LittleEndian.Uint32(h)
		b, err := src.At(off, int(frameHeaderSize+n))
		if err != nil || int64(len(b)) < frameHeaderSize+n {
			return 0, nil, 0, err
		}
		if crc32.Update(0, castagnoli, b[4:]) != sum {
			budget -= n
			return 0, nil, 0, nil
		}
		return b[8], b[frameHeaderSize:], frameHeaderSize + n, nil
	}
	var last []byte // the key of the last entry returned
	var e record.Entry
	first := true // the next frame is the snapshot's first
	ended := false
	damaged := version == 0 // no header: the file starts with damage
	lost := func(from, to int64) {
		if to > from {
			out.Lost = append(out.Lost, Lost{From: from, To: to, After: bytes.Clone(last)})
		}
	}
	damageFrom := int64(0)
	await := 0 // the first damaged range whose Before is not known yet
	for off < out.Size && !ended {
		typ, p, n, err := frame(off)
		if err != nil {
			return out, err
		}
		if n == 0 {
			if !damaged {
				damaged, damageFrom = true, off
			}
			off++
			if budget <= 0 {
				off = out.Size
			}
			continue
		}
		if damaged {
			lost(damageFrom, off)
			damaged = false
		}
		switch typ {
		case frameMeta:
			if first && (len(p) == 24 || len(p) == 32) {
				out.Meta = Meta{
					Covered:  wal.SegmentNum(binary.LittleEndian.Uint64(p)),
					Revision: record.Revision(binary.LittleEndian.Uint64(p[8:])),
					Count:    binary.LittleEndian.Uint64(p[16:]),
				}
				if len(p) == 32 {
					out.Meta.Leases = binary.LittleEndian.Uint64(p[24:])
				}
				out.MetaOK = out.Meta.Revision <= record.MaxRevision
			}
		case frameLease:
			out.Leases++
		case frameEntry:
			if err := decodeEntry(p, &e); err != nil || (last != nil && bytes.Compare(e.Key, last) <= 0) ||
				(out.MetaOK && e.ModRev > out.Meta.Revision) {
				out.Disordered++
				break
			}
			out.Entries++
			last = append(last[:0], e.Key...)
			// The keys the damaged ranges before it held come before it.
			for ; await < len(out.Lost); await++ {
				out.Lost[await].Before = bytes.Clone(e.Key)
			}
			if entry != nil {
				if err := entry(&e); err != nil {
					return out, err
				}
			}
		case frameEnd:
			ended = true
		}
		first = false
		off += n
	}
	switch {
	case damaged:
		lost(damageFrom, out.Size)
	case !ended:
		// Cut short at a frame boundary: what followed is lost, however
		// long it was.
		out.Lost = append(out.Lost, Lost{From: out.Size, To: out.Size, After: bytes.Clone(last)})
	}
	if off < out.Size && ended {
		lost(off, out.Size) // bytes after the end frame
	}
	out.Complete = len(out.Lost) == 0 && ended && out.MetaOK && out.Disordered == 0 &&
		ReadFile(fsys, name, nil, nil) == nil
	return out, nil
}
