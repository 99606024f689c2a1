package image

import (
	"bytes"
	"math"

	"github.com/kvstore/kv/internal/window"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// Salvage reads every block of the image in file name that checks out
// (its checksum and its structure), whatever damage lies around it, and
// calls entry with each of its entries whose key comes after the last one
// returned, in key order; it reports the rest, as snapshot.Salvage does
// for versions 1 and 2. It never fails on damage and never changes the
// file. It reads the file with ReadAt, not through a mapping, so that a
// file whose reads fail is an error, not a fault.
//
// The footer, when it checks out, says where the blocks end; a damaged
// range of blocks is in Lost with the keys around it. Without the footer
// every page is tried as the start of a block, and what follows the last
// block that checks out is Lost (keys after it may have been there).
// Damage outside the blocks (the first page past its header, the lease
// section and block index, the hash index, the footer) is in Index: it
// holds no key. A damaged footer or lease section sets LeasesUnknown.
// The entry is lent for the call.
func Salvage(fsys vfs.FS, name string, entry func(*record.Entry) error) (snapshot.Salvaged, error) {
	var out snapshot.Salvaged
	f, err := fsys.Open(name)
	if err != nil {
		return out, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return out, err
	}
	size := uint64(fi.Size())
	out.Size = int64(size)
	w := &pageWindow{window.New(f, int64(size))}
	index := func(from, to uint64) {
		if to > from {
			out.Index = append(out.Index, snapshot.Lost{From: int64(from), To: int64(to)})
		}
	}

	// The first page: the meta frame, then zeros.
	first, err := w.at(0, PageSize)
	if err != nil {
		return out, err
	}
	if uint64(len(first)) >= fileHeaderSize+metaFrameSize {
		fr := first[fileHeaderSize:]
		if crc(fr[4:metaFrameSize]) == u32(fr, 0) && u32(fr, 4) == metaPayloadSize && fr[8] == frameMeta {
			out.Meta.Covered = wal.SegmentNum(u64(fr, 9))
			out.Meta.Revision = record.Revision(u64(fr, 17))
			out.MetaOK = out.Meta.Revision <= record.MaxRevision
		}
	}
	switch {
	case !out.MetaOK:
		index(fileHeaderSize, min(PageSize, size))
	case !allZero(first[fileHeaderSize+metaFrameSize:]):
		index(fileHeaderSize+metaFrameSize, uint64(len(first)))
	}

	// The footer, if it checks out and its layout fits the file.
	var ft footer
	footerOK := false
	if size >= 2*PageSize+FooterSize {
		b, err := w.at(size-FooterSize, FooterSize)
		if err != nil {
			return out, err
		}
		// The version in the header picks the layout; a header too
		// damaged to say takes the first layout that fits.
		versions := []uint16{Version, VersionBlockNumbered}
		if len(first) >= fileHeaderSize && isImageVersion(u16(first, 6)) {
			versions = []uint16{u16(first, 6)}
		}
		for _, v := range versions {
			if ft, footerOK = parseFooter(b, size, v); footerOK {
				break
			}
		}
	}
	dataEnd := size / PageSize // pages 1 to dataEnd-1 may hold blocks
	if footerOK {
		dataEnd = 1 + ft.dpages
		out.Meta.Count = ft.count
	} else {
		out.LeasesUnknown = true
		if size >= FooterSize {
			index(size-FooterSize, size)
		}
	}

	// The blocks.
	var last []byte
	var e record.Entry
	damaged, damageFrom := false, uint64(0)
	await := 0 // the first damaged range whose Before is not known yet
	for p := uint64(1); p < dataEnd; {
		blk, ok, err := w.block(p, dataEnd, out.Meta.Revision, out.MetaOK)
		if err != nil {
			return out, err
		}
		if !ok {
			if !damaged {
				damaged, damageFrom = true, p*PageSize
			}
			p++
			continue
		}
		if damaged {
			out.Lost = append(out.Lost, snapshot.Lost{From: int64(damageFrom), To: int64(p * PageSize), After: bytes.Clone(last)})
			damaged = false
		}
		for j := range uint64(u16(blk, 8)) {
			e, _ = decode(blk, entryAt(blk, j), nil)
			if last != nil && bytes.Compare(e.Key, last) <= 0 {
				out.Disordered++
				continue
			}
			out.Entries++
			last = append(last[:0], e.Key...)
			for ; await < len(out.Lost); await++ {
				out.Lost[await].Before = bytes.Clone(e.Key)
			}
			if entry != nil {
				if err := entry(&e); err != nil {
					return out, err
				}
			}
		}
		p += uint64(u32(blk, 4))
	}
	switch {
	case damaged && footerOK:
		out.Lost = append(out.Lost, snapshot.Lost{From: int64(damageFrom), To: int64(dataEnd * PageSize), After: bytes.Clone(last)})
	case damaged:
		// Without the footer the end of the blocks is unknown: what
		// follows the last one that checks out may have held more.
		out.Lost = append(out.Lost, snapshot.Lost{From: int64(damageFrom), To: int64(size), After: bytes.Clone(last)})
	case !footerOK && dataEnd*PageSize < size:
		out.Lost = append(out.Lost, snapshot.Lost{From: int64(dataEnd * PageSize), To: int64(size), After: bytes.Clone(last)})
	}

	// What follows the blocks: the lease section and block index (one
	// checksum, or version 5's page checksum table), zeros to the page,
	// the hash pages.
	if footerOK {
		secOff := PageSize * dataEnd
		sec, err := w.at(secOff, int(ft.tabEnd-secOff))
		if err != nil {
			return out, err
		}
		if sectionSound(sec[:ft.secEnd-secOff], sec[ft.secEnd-secOff:], ft) {
			out.Meta.Leases = ft.nleases
			out.Leases = int(ft.nleases)
		} else {
			out.LeasesUnknown = true
			index(secOff, ft.tabEnd)
		}
		pad, err := w.at(ft.tabEnd, int(ft.hashOff-ft.tabEnd))
		if err != nil {
			return out, err
		}
		if !allZero(pad) {
			index(ft.tabEnd, ft.hashOff)
		}
		for p := range ft.hpages {
			off := ft.hashOff + p*PageSize
			pg, err := w.at(off, PageSize)
			if err != nil {
				return out, err
			}
			if crc(pg[4:]) != u32(pg, 0) || u32(pg, 4) != 0 {
				if n := len(out.Index); n > 0 && uint64(out.Index[n-1].To) == off {
					out.Index[n-1].To += PageSize
				} else {
					index(off, off+PageSize)
				}
			}
		}
	}
	out.Complete = out.MetaOK && footerOK && len(out.Lost) == 0 && len(out.Index) == 0 && out.Disordered == 0 &&
		ReadAny(fsys, name, nil, nil, nil) == nil
	return out, nil
}

// footer is an image's footer, parsed.
type footer struct {
	version                                                   uint16
	count, nblocks, dpages, nleases, leaseLen, idxLen, hpages uint64
	secEnd, tabEnd, hashOff                                   uint64
	sectionCRC                                                uint32
}

// sectionSound reports whether the lease section and block index sec,
// followed by tab (version 5's page checksum table; empty before), check
// out against ft.
func sectionSound(sec, tab []byte, ft footer) bool {
	if ft.version != Version {
		return crc(sec) == ft.sectionCRC
	}
	if crc(tab) != ft.sectionCRC {
		return false
	}
	for p := range sectionPages(uint64(len(sec))) {
		if crc(sec[p*PageSize:min((p+1)*PageSize, uint64(len(sec)))]) != u32(tab, 4*p) {
			return false
		}
	}
	return true
}

// parseFooter parses and checks b, the footer of an image of version v
// and size bytes: its checksum, and a layout that fills the file.
func parseFooter(b []byte, size uint64, v uint16) (footer, bool) {
	if uint64(len(b)) < FooterSize || crc(b[:68]) != u32(b, 68) {
		return footer{}, false
	}
	ft := footer{version: v, count: u64(b, 0), nblocks: u64(b, 8), dpages: u64(b, 16), nleases: u64(b, 24),
		leaseLen: u64(b, 32), idxLen: u64(b, 40), hpages: u64(b, 48), sectionCRC: u32(b, 64)}
	if pages := size / PageSize; ft.dpages > pages || ft.hpages > pages || ft.leaseLen > size || ft.idxLen > size {
		return footer{}, false
	}
	ft.secEnd, ft.tabEnd, ft.hashOff = sectionLayout(v, ft.dpages, ft.leaseLen, ft.idxLen)
	if ft.hashOff+PageSize*ft.hpages+FooterSize != size {
		return footer{}, false
	}
	return ft, true
}

// pageWindow reads a file a megabyte at a time, at unsigned offsets.
type pageWindow struct{ w *window.Window }

// at returns the bytes from off to off+n, fewer where the file ends.
func (w *pageWindow) at(off uint64, n int) ([]byte, error) {
	if off > math.MaxInt64 {
		return nil, nil
	}
	return w.w.At(int64(off), n)
}

// block returns the block at page p if one starts there that ends by
// page end and checks out: its checksum, its structure, and (when
// revKnown) revisions no later than rev.
func (w *pageWindow) block(p, end uint64, rev record.Revision, revKnown bool) ([]byte, bool, error) {
	h, err := w.at(p*PageSize, blockHeaderSize)
	if err != nil || len(h) < blockHeaderSize {
		return nil, false, err
	}
	pages := uint64(u32(h, 4))
	if pages == 0 || pages > end-p {
		return nil, false, nil
	}
	blk, err := w.at(p*PageSize, int(pages*PageSize))
	if err != nil || uint64(len(blk)) < pages*PageSize {
		return nil, false, err
	}
	if crc(blk[4:]) != u32(blk, 0) || !blockSound(blk, pages, rev, revKnown) {
		return nil, false, nil
	}
	return blk, true, nil
}

// blockSound checks the structure of a block of pages pages whose
// checksum checks out, as Reader.verifyBlock does, without the block
// index: its entries lie in it, in key order, with sound revisions.
func blockSound(blk []byte, pages uint64, rev record.Revision, revKnown bool) bool {
	n := uint64(u16(blk, 8))
	if n == 0 || n > maxPerBlock || (pages > 1 && n != 1) || u16(blk, 10) != 0 {
		return false
	}
	at := blockHeaderSize + 2*n
	size := uint64(len(blk))
	var prev []byte
	for j := range n {
		if uint64(u16(blk, blockHeaderSize+2*j)) != at || at+entryFixed > size {
			return false
		}
		kl := uint64(u32(blk, at+24))
		if kl > size-at-entryFixed {
			return false
		}
		vl := uint64(u32(blk, at+28+kl))
		if vl > size-at-entryFixed-kl {
			return false
		}
		create, mod, version := u64(blk, at), u64(blk, at+8), u64(blk, at+16)
		key := blk[at+28 : at+28+kl]
		if create < 1 || create > mod || revKnown && mod > uint64(rev) || mod > uint64(record.MaxRevision) ||
			version < 1 || version > uint64(record.MaxRevision) || j > 0 && bytes.Compare(prev, key) >= 0 {
			return false
		}
		prev = key
		at += entryFixed + kl + vl
		if pages > 1 && blockPages(at-blockHeaderSize-2) != pages || pages == 1 && at > PageSize {
			return false
		}
	}
	return allZero(blk[at:])
}
