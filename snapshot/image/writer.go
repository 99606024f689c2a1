package image

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// Options are a Writer's settings; the zero value is the store's.
type Options struct {
	// Seed is the key hash's seed; 0 draws a random one (crypto/rand).
	// Tests fix it to write the same bytes twice.
	Seed uint64
	// version is the format version to write: 0 is Version; tests set
	// VersionBlockNumbered, to have images of the version before.
	version uint16
}

// Writer writes an image in one sequential pass: the first page, then
// each block as soon as it is full, then at Close the leases, the block
// index, the hash index and the footer. Entries come in ascending key
// order, as a merge of an image and the log's changes gives them.
//
// Besides a block of entries, a Writer holds 8 bytes per entry (its key's
// hash, for the hash index it writes last) and about 16 bytes and a key
// per block; at Close it adds the hash index, about 11 bytes per entry.
type Writer struct {
	w       io.Writer
	err     error
	off     int64
	meta    snapshot.Meta
	seed    uint64
	version uint16

	leases []record.Lease
	bound  [][]byte // every key a lease binds, sorted: each must be met
	nbound int      // the bound keys met so far

	body  []byte   // the current block's entries
	offs  []uint16 // their offsets in the block
	prev  []byte   // the last key added
	count uint64
	pages uint64 // data pages written

	items    []byte   // the block index items
	keys     []byte   // the block index keys
	hashes   []uint64 // each entry's key hash, in key order
	at       []uint16 // each entry's offset in its block, in key order
	perBlock []uint8  // each block's entry count
	page     []byte   // a page's buffer
}

// NewWriter starts an image on w: its first page, with the meta frame
// naming meta.Covered and meta.Revision (meta.Count and meta.Leases are
// the writer's to count). leases are the live leases, in ascending id
// order, each key bound one of the entries to come (as for
// snapshot.WriteLeases).
func NewWriter(w io.Writer, meta snapshot.Meta, leases []record.Lease, opts Options) *Writer {
	iw := &Writer{w: w, meta: meta, seed: opts.Seed, version: opts.version, leases: leases, page: make([]byte, PageSize)}
	if iw.version == 0 {
		iw.version = Version
	}
	if iw.seed == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			iw.err = err
			return iw
		}
		iw.seed = binary.LittleEndian.Uint64(b[:])
	}
	for i := range leases {
		iw.bound = append(iw.bound, leases[i].Keys...)
	}
	slices.SortFunc(iw.bound, bytes.Compare)
	p := iw.page
	copy(p, magic[:])
	binary.LittleEndian.PutUint16(p[6:], iw.version)
	f := p[fileHeaderSize:]
	binary.LittleEndian.PutUint32(f[4:], metaPayloadSize)
	f[8] = frameMeta
	binary.LittleEndian.PutUint64(f[9:], uint64(meta.Covered))
	binary.LittleEndian.PutUint64(f[17:], uint64(meta.Revision))
	binary.LittleEndian.PutUint32(f, crc(f[4:metaFrameSize]))
	iw.write(p)
	return iw
}

func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	var n int
	n, w.err = w.w.Write(p)
	w.off += int64(n)
}

// errWriter is a misuse of the Writer: entries out of order, revisions
// outside the snapshot's, a lease binding a key that is not an entry.
func errWriter(format string, args ...any) error {
	return fmt.Errorf("image: "+format, args...)
}

// Add appends e, whose key must be above the previous entry's.
func (w *Writer) Add(e *record.Entry) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case w.count > 0 && bytes.Compare(w.prev, e.Key) >= 0:
		w.err = errWriter("key %q after %q", e.Key, w.prev)
	case e.CreateRev < 1 || e.CreateRev > e.ModRev || e.ModRev > w.meta.Revision || e.Version < 1:
		w.err = errWriter("key %q with revisions %d/%d and version %d in an image at revision %d",
			e.Key, e.CreateRev, e.ModRev, e.Version, w.meta.Revision)
	case uint64(len(e.Key)) > 1<<32-1 || uint64(len(e.Value)) > 1<<32-1:
		w.err = errWriter("key %q or its value longer than 4 GiB", e.Key)
	}
	for w.err == nil && w.nbound < len(w.bound) && bytes.Compare(w.bound[w.nbound], e.Key) <= 0 {
		if !bytes.Equal(w.bound[w.nbound], e.Key) {
			w.err = errWriter("a lease binds %q, which is not an entry", w.bound[w.nbound])
		}
		w.nbound++
	}
	if w.err != nil {
		return w.err
	}
	size := entryFixed + len(e.Key) + len(e.Value)
	if len(w.offs) > 0 && blockHeaderSize+2*(len(w.offs)+1)+len(w.body)+size > PageSize {
		w.flush()
	}
	if len(w.offs) == 0 {
		w.startBlock(e.Key)
	}
	w.offs = append(w.offs, 0) // set by flush
	w.body = binary.LittleEndian.AppendUint64(w.body, uint64(e.CreateRev))
	w.body = binary.LittleEndian.AppendUint64(w.body, uint64(e.ModRev))
	w.body = binary.LittleEndian.AppendUint64(w.body, uint64(e.Version))
	w.body = binary.LittleEndian.AppendUint32(w.body, uint32(len(e.Key)))
	w.body = append(w.body, e.Key...)
	w.body = binary.LittleEndian.AppendUint32(w.body, uint32(len(e.Value)))
	w.body = append(w.body, e.Value...)
	w.hashes = append(w.hashes, xxh64(e.Key, w.seed))
	w.prev = append(w.prev[:0], e.Key...)
	w.count++
	if blockHeaderSize+2+size > PageSize {
		w.flush() // a block of its own
	}
	return w.err
}

// startBlock adds the block index item of a block starting with key.
func (w *Writer) startBlock(key []byte) {
	if len(w.perBlock) >= maxBlocks || uint64(len(w.keys))+uint64(len(key)) > 1<<32-1 {
		w.err = errWriter("more blocks, or block index keys, than an image holds")
		return
	}
	w.items = binary.LittleEndian.AppendUint64(w.items, 1+w.pages)
	w.items = binary.LittleEndian.AppendUint32(w.items, uint32(len(w.keys)))
	w.items = binary.LittleEndian.AppendUint32(w.items, uint32(len(key)))
	w.keys = append(w.keys, key...)
}

// flush writes the current block.
func (w *Writer) flush() {
	n := len(w.offs)
	if n == 0 || w.err != nil {
		return
	}
	head := blockHeaderSize + 2*n
	pages := uint64(1)
	if n == 1 {
		pages = blockPages(uint64(len(w.body)))
	}
	if w.pages+pages > maxDataPages {
		w.err = errWriter("more data pages than an image holds")
		return
	}
	var blk []byte
	if pages == 1 {
		blk = w.page
		clear(blk)
	} else {
		blk = make([]byte, pages*PageSize)
	}
	binary.LittleEndian.PutUint32(blk[4:], uint32(pages))
	binary.LittleEndian.PutUint16(blk[8:], uint16(n))
	off := head
	for i := range n {
		binary.LittleEndian.PutUint16(blk[blockHeaderSize+2*i:], uint16(off))
		w.at = append(w.at, uint16(off))
		kl := int(binary.LittleEndian.Uint32(w.body[off-head+24:]))
		vl := int(binary.LittleEndian.Uint32(w.body[off-head+28+kl:]))
		off += entryFixed + kl + vl
	}
	copy(blk[head:], w.body)
	binary.LittleEndian.PutUint32(blk, crc(blk[4:]))
	w.write(blk)
	w.pages += pages
	w.perBlock = append(w.perBlock, uint8(n))
	w.body = w.body[:0]
	w.offs = w.offs[:0]
}

// Close writes the rest of the image: the last block, the leases, the
// block index, the hash index and the footer. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	w.flush()
	if w.nbound < len(w.bound) {
		w.err = errWriter("a lease binds %q, which is not an entry", w.bound[w.nbound])
		return w.err
	}
	// The lease section and the block index, then (version 5) a checksum
	// of each of their pages, which the footer's checksums; before, one
	// checksum of both, in the footer.
	var sec []byte
	var prevID record.LeaseID
	for i := range w.leases {
		le := &w.leases[i]
		if le.ID <= prevID || le.TTL <= 0 || le.Deadline <= 0 || record.Revision(le.ID) > w.meta.Revision {
			w.err = errWriter("lease %d (ttl %d, deadline %d) after lease %d in an image at revision %d",
				le.ID, le.TTL, le.Deadline, prevID, w.meta.Revision)
			return w.err
		}
		prevID = le.ID
		sec = binary.LittleEndian.AppendUint64(sec, uint64(le.ID))
		sec = binary.LittleEndian.AppendUint64(sec, uint64(le.TTL))
		sec = binary.LittleEndian.AppendUint64(sec, uint64(le.Deadline))
		sec = binary.LittleEndian.AppendUint32(sec, uint32(len(le.Keys)))
		for j, k := range le.Keys {
			if j > 0 && bytes.Compare(le.Keys[j-1], k) >= 0 {
				w.err = errWriter("lease %d: key %q after %q", le.ID, k, le.Keys[j-1])
				return w.err
			}
			sec = binary.LittleEndian.AppendUint32(sec, uint32(len(k)))
			sec = append(sec, k...)
		}
	}
	for i := 1; i < len(w.bound); i++ {
		if bytes.Equal(w.bound[i], w.bound[i-1]) {
			w.err = errWriter("key %q bound to two leases", w.bound[i])
			return w.err
		}
	}
	leaseLen := len(sec)
	sec = append(sec, w.items...)
	sec = append(sec, w.keys...)
	sectionCRC := crc(sec)
	w.write(sec)
	if w.version == Version {
		var tab []byte
		for p := range sectionPages(uint64(len(sec))) {
			tab = binary.LittleEndian.AppendUint32(tab, crc(sec[p*PageSize:min((p+1)*PageSize, uint64(len(sec)))]))
		}
		sectionCRC = crc(tab)
		w.write(tab)
	}
	if pad := (PageSize - w.off%PageSize) % PageSize; pad > 0 {
		w.write(make([]byte, pad))
	}

	// The hash index: each entry, in key order, in the first empty slot
	// of its probe.
	pages := hashPages(w.count)
	nslots := pages * slotsPerPage
	slots := make([]uint64, nslots)
	k := 0
	for b, n := range w.perBlock {
		// Version 5 names the block by its first page, the version
		// before by its number.
		block := uint64(b)
		if w.version == Version {
			block = binary.LittleEndian.Uint64(w.items[itemSize*b:])
		}
		for range int(n) {
			h, at := w.hashes[k], w.at[k]
			k++
			j := probeStart(h, nslots)
			for slots[j] != 0 {
				if j++; j == nslots {
					j = 0
				}
			}
			slots[j] = slotsByOffset.slot(h, block, uint64(at))
		}
	}
	w.hashes, w.at = nil, nil
	for p := range pages {
		pg := w.page
		clear(pg[:hashPageHead])
		for i, s := range slots[p*slotsPerPage : (p+1)*slotsPerPage] {
			binary.LittleEndian.PutUint64(pg[hashPageHead+8*i:], s)
		}
		binary.LittleEndian.PutUint32(pg, crc(pg[4:]))
		w.write(pg)
	}

	var f [FooterSize]byte
	binary.LittleEndian.PutUint64(f[0:], w.count)
	binary.LittleEndian.PutUint64(f[8:], uint64(len(w.perBlock)))
	binary.LittleEndian.PutUint64(f[16:], w.pages)
	binary.LittleEndian.PutUint64(f[24:], uint64(len(w.leases)))
	binary.LittleEndian.PutUint64(f[32:], uint64(leaseLen))
	binary.LittleEndian.PutUint64(f[40:], uint64(len(w.items)+len(w.keys)))
	binary.LittleEndian.PutUint64(f[48:], pages)
	binary.LittleEndian.PutUint64(f[56:], w.seed)
	binary.LittleEndian.PutUint32(f[64:], sectionCRC)
	binary.LittleEndian.PutUint32(f[68:], crc(f[:68]))
	w.write(f[:])
	if w.err == nil {
		w.err = errClosedWriter
		return nil
	}
	return w.err
}

var errClosedWriter = errors.New("image: writer closed")

// Encode writes an image of entries (in ascending key order) and leases
// to w, its meta frame naming meta.Covered and meta.Revision.
func Encode(w io.Writer, meta snapshot.Meta, leases []record.Lease, entries iter.Seq[*record.Entry], opts Options) error {
	iw := NewWriter(w, meta, leases, opts)
	for e := range entries {
		if err := iw.Add(e); err != nil {
			return err
		}
	}
	return iw.Close()
}

// Write publishes an image as dir/name, as every snapshot is published
// (vfs.Publish: name.tmp written, synced, renamed, dir synced): durable
// when Write returns nil, and after a crash at any point dir/name holds
// its old or its new contents.
func Write(fsys vfs.FS, dir, name string, meta snapshot.Meta, leases []record.Lease, entries iter.Seq[*record.Entry], opts Options) error {
	return WriteAll(fsys, dir, name, meta, leases, func(yield func(*record.Entry, error) bool) {
		for e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}, opts)
}

// WriteAll is Write of entries that may fail, as a scan of a map over an
// image does (layered.Map.All): the first error ends the write before
// anything is published, and WriteAll returns it; dir/name keeps its old
// contents.
func WriteAll(fsys vfs.FS, dir, name string, meta snapshot.Meta, leases []record.Lease, entries iter.Seq2[*record.Entry, error], opts Options) error {
	return vfs.Publish(fsys, dir, name, func(w io.Writer) error {
		iw := NewWriter(w, meta, leases, opts)
		for e, err := range entries {
			if err != nil {
				return err
			}
			if err := iw.Add(e); err != nil {
				return err
			}
		}
		return iw.Close()
	})
}
