package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"path"
	"slices"
	"strings"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Name is the snapshot's file name in the data directory; TmpName is the
// name it is written under before it is published. Part of the on-disk
// format.
const (
	Name    = "snapshot"
	TmpName = Name + ".tmp"
)

// Format constants, part of the on-disk format.
const (
	// Version is the newest snapshot format version this code writes and
	// reads: 2, a snapshot that holds leases. It writes version 1 (the
	// same bytes without the lease frames) when no lease is live, and
	// reads both.
	Version = 2
	// versionNoLeases is the version of a snapshot without leases.
	versionNoLeases = 1
	// fileHeaderSize is the magic and version at the start of the file.
	fileHeaderSize = 8
	// frameHeaderSize is the CRC, length and type before each payload.
	frameHeaderSize = 9
	// maxFrame bounds a frame's payload, so that a damaged length cannot
	// make a reader allocate without limit.
	maxFrame = 1 << 30
	// MinEntrySize is the smallest an entry frame can be on disk (header,
	// revisions, two lengths, a one-byte key): a file of n bytes holds at
	// most n/MinEntrySize entries.
	MinEntrySize = frameHeaderSize + 24 + 4 + 1 + 4
	// leaseFrameSize is a lease frame's payload: id, ttl, deadline, key
	// count.
	leaseFrameSize = 32
)

var magic = [6]byte{'K', 'V', 'S', 'N', 'A', 'P'}

// Frame types, part of the on-disk format; 0 is invalid.
const (
	frameMeta     = 1 // first frame: covered segment, revision, entry count (and lease count)
	frameEntry    = 2 // one key
	frameEnd      = 3 // last frame: entry count and CRC of the file before it
	frameLease    = 4 // version 2: a lease, its keys in the frames after it
	frameLeaseKey = 5 // version 2: a key bound to the lease before it
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Meta is the first record of a snapshot: what it covers.
type Meta struct {
	// Covered is the highest segment whose records are all in the
	// snapshot. Segments up to Covered are never replayed on top of it,
	// and may be deleted once the snapshot is durable.
	Covered wal.SegmentNum
	// Revision is the revision of the last record in the snapshot; a
	// reader refuses one above record.MaxRevision (Write does not check:
	// tests craft such files with it).
	Revision record.Revision
	// Count is the number of entries.
	Count uint64
	// Leases is the number of live leases the snapshot holds (format
	// version 2); 0 in a snapshot of version 1. Read sets it; the writers
	// set it from the leases they are given.
	Leases uint64
}

// Write publishes a snapshot in dir: it writes meta and then entries to
// snapshot.tmp, syncs it, renames it to snapshot and syncs dir (see
// vfs.Publish). entries must yield exactly meta.Count entries in key
// order. When Write returns nil the snapshot is durable.
func Write(fsys vfs.FS, dir string, meta Meta, entries iter.Seq[*record.Entry]) error {
	return WriteLeases(fsys, dir, meta, nil, entries)
}

// WriteLeases is Write of a snapshot that also holds leases: the live
// leases with their keys, in ascending id order, each key one of the
// entries (format version 2, or 1 when leases is empty).
func WriteLeases(fsys vfs.FS, dir string, meta Meta, leases []record.Lease, entries iter.Seq[*record.Entry]) error {
	return vfs.Publish(fsys, dir, Name, func(w io.Writer) error {
		return EncodeLeases(w, meta, leases, entries)
	})
}

// Encode writes a snapshot's bytes to w.
func Encode(w io.Writer, meta Meta, entries iter.Seq[*record.Entry]) error {
	return EncodeLeases(w, meta, nil, entries)
}

// EncodeLeases writes the bytes of a snapshot holding leases to w (see
// WriteLeases).
func EncodeLeases(w io.Writer, meta Meta, leases []record.Lease, entries iter.Seq[*record.Entry]) error {
	crc := uint32(0)
	var buf []byte
	emit := func(typ byte, payload []byte) error {
		buf = buf[:0]
		buf = binary.LittleEndian.AppendUint32(buf, 0)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
		buf = append(buf, typ)
		buf = append(buf, payload...)
		binary.LittleEndian.PutUint32(buf, crc32.Update(0, castagnoli, buf[4:]))
		crc = crc32.Update(crc, castagnoli, buf)
		_, err := w.Write(buf)
		return err
	}
	version := uint16(versionNoLeases)
	if len(leases) > 0 {
		version = Version
	}
	head := append(magic[:], 0, 0)
	binary.LittleEndian.PutUint16(head[6:], version)
	crc = crc32.Update(crc, castagnoli, head)
	if _, err := w.Write(head); err != nil {
		return err
	}
	var p []byte
	p = binary.LittleEndian.AppendUint64(p, uint64(meta.Covered))
	p = binary.LittleEndian.AppendUint64(p, uint64(meta.Revision))
	p = binary.LittleEndian.AppendUint64(p, meta.Count)
	if version == Version {
		p = binary.LittleEndian.AppendUint64(p, uint64(len(leases)))
	}
	if err := emit(frameMeta, p); err != nil {
		return err
	}
	for i := range leases {
		le := &leases[i]
		p = binary.LittleEndian.AppendUint64(p[:0], uint64(le.ID))
		p = binary.LittleEndian.AppendUint64(p, uint64(le.TTL))
		p = binary.LittleEndian.AppendUint64(p, uint64(le.Deadline))
		p = binary.LittleEndian.AppendUint64(p, uint64(len(le.Keys)))
		if err := emit(frameLease, p); err != nil {
			return err
		}
		for _, k := range le.Keys {
			if err := emit(frameLeaseKey, k); err != nil {
				return err
			}
		}
	}
	var n uint64
	for e := range entries {
		p = p[:0]
		p = binary.LittleEndian.AppendUint64(p, uint64(e.CreateRev))
		p = binary.LittleEndian.AppendUint64(p, uint64(e.ModRev))
		p = binary.LittleEndian.AppendUint64(p, uint64(e.Version))
		p = binary.LittleEndian.AppendUint32(p, uint32(len(e.Key)))
		p = append(p, e.Key...)
		p = binary.LittleEndian.AppendUint32(p, uint32(len(e.Value)))
		p = append(p, e.Value...)
		if err := emit(frameEntry, p); err != nil {
			return err
		}
		n++
	}
	if n != meta.Count {
		return fmt.Errorf("snapshot: %d entries written, meta says %d", n, meta.Count)
	}
	p = binary.LittleEndian.AppendUint64(p[:0], n)
	p = binary.LittleEndian.AppendUint32(p, crc)
	return emit(frameEnd, p)
}

// ReadMeta reads only the first record of the snapshot in dir. It checks
// that record's checksum, not the whole file's: use Read for that.
func ReadMeta(fsys vfs.FS, dir string) (Meta, error) {
	var meta Meta
	err := ReadFile(fsys, path.Join(dir, Name), func(m Meta) error {
		meta = m
		return errStop
	}, nil)
	if errors.Is(err, errStop) {
		err = nil
	}
	return meta, err
}

var errStop = errors.New("stop")

// Read verifies the snapshot in dir and streams it back: the meta record,
// then each entry in key order. The callbacks may run before damage later
// in the file is found: discard what they built if Read returns an error.
// The entry is lent for the call: its Key and Value point into the
// decoder's buffer, which the next entry overwrites (Map.Load copies).
// A missing snapshot is an error matching fs.ErrNotExist. The leases of a
// snapshot of version 2 are verified and left out: ReadLeases streams
// them too.
func Read(fsys vfs.FS, dir string, meta func(Meta) error, entry func(*record.Entry) error) error {
	return ReadFileLeases(fsys, path.Join(dir, Name), meta, nil, entry)
}

// ReadLeases is Read streaming the leases too: each live lease, with its
// keys (its own copies), after the meta record and before the entries.
func ReadLeases(fsys vfs.FS, dir string, meta func(Meta) error, lease func(*record.Lease) error, entry func(*record.Entry) error) error {
	return ReadFileLeases(fsys, path.Join(dir, Name), meta, lease, entry)
}

// ReadFile is Read on an explicit file name.
func ReadFile(fsys vfs.FS, name string, meta func(Meta) error, entry func(*record.Entry) error) error {
	return ReadFileLeases(fsys, name, meta, nil, entry)
}

// ReadFileLeases is ReadLeases on an explicit file name.
func ReadFileLeases(fsys vfs.FS, name string, meta func(Meta) error, lease func(*record.Lease) error, entry func(*record.Entry) error) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	vfs.WillNeed(f) // the disk reads ahead while entries are decoded
	// The buffer need not be bigger than the file: a small store's
	// recovery should not allocate (and clear) 256 KiB to read it.
	d := &decoder{name: name, size: fi.Size(),
		r: bufio.NewReaderSize(io.NewSectionReader(f, 0, fi.Size()), int(min(fi.Size()+1, 256<<10)))}
	return d.run(meta, lease, entry)
}

// Decode verifies a snapshot held in memory and streams it back as Read
// does.
func Decode(b []byte, meta func(Meta) error, entry func(*record.Entry) error) error {
	return DecodeLeases(b, meta, nil, entry)
}

// DecodeLeases verifies a snapshot held in memory and streams it back as
// ReadLeases does.
func DecodeLeases(b []byte, meta func(Meta) error, lease func(*record.Lease) error, entry func(*record.Entry) error) error {
	d := &decoder{name: "snapshot", size: int64(len(b)), r: bufio.NewReader(&byteReader{b: b})}
	return d.run(meta, lease, entry)
}

// DecodeReader verifies a snapshot of size bytes read from r, front to
// back, and streams it back as ReadLeases does; errors name the file
// name. It reads at most size bytes from r, and all of them when it
// returns nil, so that a copy taken as r is read (an io.TeeReader) holds
// exactly the snapshot it verified.
func DecodeReader(r io.Reader, name string, size int64, meta func(Meta) error, lease func(*record.Lease) error, entry func(*record.Entry) error) error {
	d := &decoder{name: name, size: size, r: bufio.NewReaderSize(io.LimitReader(r, size), int(min(size+1, 256<<10)))}
	return d.run(meta, lease, entry)
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

type decoder struct {
	buf  []byte // the current frame
	name string
	size int64
	r    *bufio.Reader
	off  int64
	crc  uint32
}

func (d *decoder) corrupt(off int64, format string, args ...any) error {
	return &corrupt.Error{Err: ErrCorrupt, File: d.name, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) read(p []byte) error {
	n, err := io.ReadFull(d.r, p)
	d.off += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return d.corrupt(d.off, "file cut short")
	}
	return err
}

// frame reads one frame and returns its type and payload.
func (d *decoder) frame() (byte, []byte, int64, error) {
	start := d.off
	var h [frameHeaderSize]byte
	if err := d.read(h[:]); err != nil {
		return 0, nil, start, err
	}
	n := binary.LittleEndian.Uint32(h[4:])
	if int64(n) > d.size-d.off || n > maxFrame {
		return 0, nil, start, d.corrupt(start, "frame length %d past the end of the file", n)
	}
	// One buffer serves every frame: entries copy out what they keep.
	if cap(d.buf) < int(n) {
		d.buf = make([]byte, n)
	}
	p := d.buf[:n]
	if err := d.read(p); err != nil {
		return 0, nil, start, err
	}
	c := crc32.Update(0, castagnoli, h[4:])
	c = crc32.Update(c, castagnoli, p)
	if c != binary.LittleEndian.Uint32(h[:]) {
		return 0, nil, start, d.corrupt(start, "frame checksum mismatch")
	}
	fileCRC := d.crc
	d.crc = crc32.Update(d.crc, castagnoli, h[:])
	d.crc = crc32.Update(d.crc, castagnoli, p)
	if h[8] == frameEnd {
		// The end frame carries the CRC of everything before it.
		if len(p) != 12 {
			return 0, nil, start, d.corrupt(start, "end frame of %d bytes", len(p))
		}
		if binary.LittleEndian.Uint32(p[8:]) != fileCRC {
			return 0, nil, start, d.corrupt(start, "file checksum mismatch")
		}
	}
	return h[8], p, start, nil
}

func (d *decoder) run(metaFn func(Meta) error, leaseFn func(*record.Lease) error, entryFn func(*record.Entry) error) error {
	var head [fileHeaderSize]byte
	if err := d.read(head[:]); err != nil {
		return err
	}
	if [6]byte(head[:6]) != magic {
		return d.corrupt(0, "bad magic")
	}
	version := binary.LittleEndian.Uint16(head[6:])
	if version != versionNoLeases && version != Version {
		return &corrupt.Error{Err: ErrVersion, File: d.name, Offset: 6,
			Reason: fmt.Sprintf("snapshot format version %d, this build reads versions %d and %d", version, versionNoLeases, Version)}
	}
	d.crc = crc32.Update(0, castagnoli, head[:])
	typ, p, off, err := d.frame()
	if err != nil {
		return err
	}
	metaSize := 24
	if version == Version {
		metaSize = 32
	}
	if typ != frameMeta || len(p) != metaSize {
		return d.corrupt(off, "first frame is not the meta record of a version %d snapshot", version)
	}
	meta := Meta{
		Covered:  wal.SegmentNum(binary.LittleEndian.Uint64(p)),
		Revision: record.Revision(binary.LittleEndian.Uint64(p[8:])),
		Count:    binary.LittleEndian.Uint64(p[16:]),
	}
	if version == Version {
		if meta.Leases = binary.LittleEndian.Uint64(p[24:]); meta.Leases == 0 {
			return d.corrupt(off, "a version %d snapshot without leases", version)
		}
	}
	if meta.Revision > record.MaxRevision {
		// The store would continue from it: its next record would need a
		// revision that does not fit in the int64 that compares use, or
		// wrap to 0. Every entry's revisions are bounded by this one.
		return d.corrupt(off, "snapshot revision %d past the largest a store can hold, %d", meta.Revision, record.MaxRevision)
	}
	if metaFn != nil {
		if err := metaFn(meta); err != nil {
			return err
		}
	}
	bound, err := d.leases(meta, leaseFn)
	if err != nil {
		return err
	}
	var n uint64
	var prev []byte
	var e record.Entry
	for {
		typ, p, off, err := d.frame()
		if err != nil {
			return err
		}
		switch typ {
		case frameEntry:
			if err := decodeEntry(p, &e); err != nil {
				return d.corrupt(off, "%v", err)
			}
			if n > 0 && bytes.Compare(prev, e.Key) >= 0 {
				return d.corrupt(off, "key %q out of order", e.Key)
			}
			// Every key bound to a lease is an entry: the bound keys,
			// sorted, are met in the same order as the entries.
			if len(bound) > 0 && bound[0].key < string(e.Key) {
				return d.corrupt(bound[0].off, "lease %d binds key %q, which is not in the snapshot", bound[0].id, bound[0].key)
			}
			if len(bound) > 0 && bound[0].key == string(e.Key) {
				bound = bound[1:]
			}
			prev = append(prev[:0], e.Key...)
			if e.ModRev > meta.Revision || e.CreateRev > e.ModRev {
				return d.corrupt(off, "entry revisions %d/%d past the snapshot revision %d", e.CreateRev, e.ModRev, meta.Revision)
			}
			n++
			if entryFn != nil {
				if err := entryFn(&e); err != nil {
					return err
				}
			}
		case frameEnd:
			if c := binary.LittleEndian.Uint64(p); c != n || c != meta.Count {
				return d.corrupt(off, "%d entries read, end frame says %d, meta says %d", n, c, meta.Count)
			}
			if len(bound) > 0 {
				return d.corrupt(bound[0].off, "lease %d binds key %q, which is not in the snapshot", bound[0].id, bound[0].key)
			}
			if d.off != d.size {
				return d.corrupt(d.off, "%d bytes after the end frame", d.size-d.off)
			}
			return nil
		default:
			return d.corrupt(off, "unexpected frame type %d", typ)
		}
	}
}

// boundKey is a key a lease frame binds, for the check that it is an
// entry.
type boundKey struct {
	key string
	id  record.LeaseID
	off int64 // the lease frame's
}

// leases reads the lease frames of a version 2 snapshot (meta.Leases of
// them, each followed by its key frames), checks them and hands each to
// fn, and returns every key bound, in key order.
func (d *decoder) leases(meta Meta, fn func(*record.Lease) error) ([]boundKey, error) {
	var bound []boundKey
	var prevID record.LeaseID
	for i := range meta.Leases {
		typ, p, off, err := d.frame()
		if err != nil {
			return nil, err
		}
		if typ != frameLease || len(p) != leaseFrameSize {
			return nil, d.corrupt(off, "lease %d of %d: a frame of type %d and %d bytes", i+1, meta.Leases, typ, len(p))
		}
		le := record.Lease{
			ID:       record.LeaseID(binary.LittleEndian.Uint64(p)),
			TTL:      int64(binary.LittleEndian.Uint64(p[8:])),
			Deadline: int64(binary.LittleEndian.Uint64(p[16:])),
		}
		nkeys := binary.LittleEndian.Uint64(p[24:])
		switch {
		case le.ID <= prevID:
			return nil, d.corrupt(off, "lease %d after lease %d", le.ID, prevID)
		case le.ID == 0 || record.Revision(le.ID) > meta.Revision:
			return nil, d.corrupt(off, "lease id %d outside 1 to the snapshot revision %d", le.ID, meta.Revision)
		case le.TTL <= 0 || le.Deadline <= 0:
			return nil, d.corrupt(off, "lease %d with ttl %d and deadline %d", le.ID, le.TTL, le.Deadline)
		case nkeys > uint64(d.size-d.off)/frameHeaderSize:
			return nil, d.corrupt(off, "lease %d binds %d keys, more than the file can hold", le.ID, nkeys)
		}
		prevID = le.ID
		for j := range nkeys {
			typ, p, koff, err := d.frame()
			if err != nil {
				return nil, err
			}
			if typ != frameLeaseKey {
				return nil, d.corrupt(koff, "key %d of lease %d: a frame of type %d", j+1, le.ID, typ)
			}
			if j > 0 && bytes.Compare(le.Keys[j-1], p) >= 0 {
				return nil, d.corrupt(koff, "key %q of lease %d out of order", p, le.ID)
			}
			le.Keys = append(le.Keys, bytes.Clone(p))
			bound = append(bound, boundKey{key: string(p), id: le.ID, off: off})
		}
		if fn != nil {
			if err := fn(&le); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(bound, func(a, b boundKey) int { return strings.Compare(a.key, b.key) })
	for i := 1; i < len(bound); i++ {
		if bound[i].key == bound[i-1].key {
			return nil, d.corrupt(max(bound[i].off, bound[i-1].off), "key %q bound to leases %d and %d", bound[i].key, bound[i-1].id, bound[i].id)
		}
	}
	return bound, nil
}

// decodeEntry parses an entry frame's payload into e, whose key and value
// then point into p, the decoder's reused frame buffer.
func decodeEntry(p []byte, e *record.Entry) error {
	if len(p) < 28 {
		return fmt.Errorf("entry frame of %d bytes", len(p))
	}
	*e = record.Entry{
		CreateRev: record.Revision(binary.LittleEndian.Uint64(p)),
		ModRev:    record.Revision(binary.LittleEndian.Uint64(p[8:])),
		Version:   int64(binary.LittleEndian.Uint64(p[16:])),
	}
	rest := p[24:]
	kl := binary.LittleEndian.Uint32(rest)
	if uint64(kl)+8 > uint64(len(rest)) {
		return fmt.Errorf("key length %d past the frame", kl)
	}
	e.Key = rest[4 : 4+kl : 4+kl]
	rest = rest[4+kl:]
	vl := binary.LittleEndian.Uint32(rest)
	if uint64(vl)+4 != uint64(len(rest)) {
		return fmt.Errorf("value length %d does not fill the frame", vl)
	}
	e.Value = rest[4 : 4+vl : 4+vl]
	if e.CreateRev == 0 || e.Version < 1 {
		return fmt.Errorf("entry with create revision %d and version %d", e.CreateRev, e.Version)
	}
	return nil
}
