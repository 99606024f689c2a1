package image

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/kvstore/kv/snapshot"
)

// TestSlotNamingNoEntry rewrites one hash slot of a version 4 image to
// name an offset where no entry starts, and makes its page's checksum
// hold again, as only a made-up file would: a lookup never panics and
// never returns the entry wrong (an error matching ErrCorrupt, or the
// key's absence, which is all a slot that names no entry can give), and
// Verify finds the slot. Offset 14 is where a block's offset table would
// end if it had one entry; 4064, the last offset the slot check allows,
// holds zeros or a value's bytes; one past the entry, its create
// revision's second byte.
func TestSlotNamingNoEntry(t *testing.T) {
	c := makeContent(60, func(i int) int { return 40 + i%13 }, false)
	img := c.encode(t)
	r, err := Open(memFile(t, img))
	must(t, err)
	hashOff := r.hashOff
	r.Close()
	le := binary.LittleEndian
	for _, rewrite := range []struct {
		name string
		pos  func(at uint64) uint64
	}{
		{"14", func(uint64) uint64 { return minEntryAt }},
		{"4064", func(uint64) uint64 { return PageSize - entryFixed }},
		{"past the start", func(at uint64) uint64 { return at + 1 }},
	} {
		t.Run(rewrite.name, func(t *testing.T) {
			b := append([]byte(nil), img...)
			// The first slot in use, of the first hash page.
			var s uint64
			for j := range uint64(slotsPerPage) {
				if s = hashOff + hashPageHead + 8*j; le.Uint64(b[s:]) != 0 {
					break
				}
			}
			slot := le.Uint64(b[s:])
			bi, at := slotsByOffset.split(slot)
			pos := rewrite.pos(at)
			if pos == at {
				t.Skip("the entry is at the offset the case names")
			}
			le.PutUint64(b[s:], slot&^(1<<slotsByOffset.pos-1)|pos)
			le.PutUint32(b[hashOff:], crc(b[hashOff+4:hashOff+PageSize]))
			r, err := Open(memFile(t, b))
			must(t, err)
			defer r.Close()
			for i := range c.entries {
				e := &c.entries[i]
				got, ok, err := r.Get(e.Key)
				switch {
				case err != nil:
					if !errors.Is(err, snapshot.ErrCorrupt) {
						t.Fatalf("Get(%q): %v, not ErrCorrupt", e.Key, err)
					}
				case ok && (string(got.Value) != string(e.Value) || got.ModRev != e.ModRev):
					t.Fatalf("Get(%q) = %q at %d, want %q at %d (slot of block %d now names offset %d)", e.Key, got.Value, got.ModRev, e.Value, e.ModRev, bi, pos)
				}
			}
			if err := r.Verify(); !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Verify of an image whose slot names offset %d of block %d: %v", pos, bi, err)
			}
		})
	}
}

// asVersion3 rewrites a version 4 image (VersionBlockNumbered) as
// version 3 would have held it:
// each slot names its entry's position instead of its offset and keeps
// 23 bits of the hash, the version says 3, and the hash pages' checksums
// are made again. It is the image the Writer wrote before version 4.
func asVersion3(t *testing.T, img []byte) []byte {
	t.Helper()
	r, err := Open(memFile(t, img))
	must(t, err)
	defer r.Close()
	le := binary.LittleEndian
	b := append([]byte(nil), img...)
	le.PutUint16(b[6:], VersionNamedByPosition)
	for p := range r.hashPages {
		pg := b[r.hashOff+p*PageSize : r.hashOff+(p+1)*PageSize]
		for j := range uint64(slotsPerPage) {
			s := le.Uint64(pg[hashPageHead+8*j:])
			if s == 0 {
				continue
			}
			bi, at := slotsByOffset.split(s)
			blk, err := r.block(bi)
			must(t, err)
			pos := uint64(0)
			for entryAt(blk, pos) != at {
				pos++
			}
			h := xxh64(entryKey(blk, at), r.seed)
			le.PutUint64(pg[hashPageHead+8*j:], slotsByPosition.slot(h, bi, pos))
		}
		le.PutUint32(pg, crc(pg[4:]))
	}
	return b
}

// TestVersion3 reads images of version 3, which no Writer writes any
// more and a store's directory may still hold: every read as of the
// version 4 image they were made from, and a flip of any byte of one
// either ErrCorrupt or harmless, never a wrong answer, as the corruption
// matrix checks for version 4.
func TestVersion3(t *testing.T) {
	for _, c := range []*content{
		makeContent(0, nil, false),
		makeContent(3, func(int) int { return 2 }, false),
		makeContent(300, func(i int) int { return i % 50 }, true),
		makeContent(5, func(i int) int { return 4100 * (i % 2) }, false),
	} {
		img := asVersion3(t, c.encodeVersion(t, VersionBlockNumbered))
		r, err := Open(memFile(t, img))
		must(t, err)
		if r.version != VersionNamedByPosition {
			t.Fatalf("opened as version %d", r.version)
		}
		checkReader(t, r, c)
		r.Close()
	}
	if testing.Short() {
		t.Skip("a flip of every byte")
	}
	c := makeContent(40, func(i int) int {
		if i == 20 {
			return 5000
		}
		return 60 + i%37
	}, true)
	img := asVersion3(t, c.encodeVersion(t, VersionBlockNumbered))
	fs, name := memFile(t, img)
	f, err := fs.OpenReadWrite(name)
	must(t, err)
	defer f.Close()
	for off := range img {
		_, err := f.WriteAt([]byte{img[off] ^ 0x01}, int64(off))
		must(t, err)
		checkDamaged(t, fs, name, c, off)
		_, err = f.WriteAt(img[off:off+1], int64(off))
		must(t, err)
	}
}

// TestPageEnds checks the lazily made table of block ends: 0 for a page
// never stored, each store read back at its own page only, across
// arrays and at the last page of a partial one, with stores racing on
// the same new array (go test -race).
func TestPageEnds(t *testing.T) {
	const pages = 3*endsChunk + 5
	e := newPageEnds(pages)
	if len(e.chunks) != 4 {
		t.Fatalf("%d arrays for %d pages, want 4", len(e.chunks), pages)
	}
	for _, i := range []uint64{0, endsChunk - 1, endsChunk, pages - 1} {
		if got := e.load(i); got != 0 {
			t.Errorf("load(%d) before any store = %d", i, got)
		}
	}
	var wg sync.WaitGroup
	for g := range uint64(8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < pages; i += 8 {
				e.store(i, uint32(i+1))
			}
		}()
	}
	wg.Wait()
	for i := range uint64(pages) {
		if got := e.load(i); got != uint32(i+1) {
			t.Fatalf("load(%d) = %d, want %d", i, got, i+1)
		}
	}
}
