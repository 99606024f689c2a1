package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// TestCorruptionMatrix flips every byte of a small image (two kinds of
// flip) and reads everything back: each read returns the right entry or
// snapshot.ErrCorrupt naming the file, never a wrong value, a wrong
// absence or a panic; and no flip goes unnoticed by Open, the reads and
// Verify together, since every byte of the format is checksummed or
// checked. A flip of the version is ErrVersion.
//
// The image has several blocks, one of two pages, leases and a hash page;
// the matrix is shown to catch a reader that skips a block's checksum
// (verifyBlock returning nil at once makes it report wrong values). It
// runs on an image of Version and of VersionBlockNumbered, whose block
// index is checked whole at open.
func TestCorruptionMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("a flip of every byte")
	}
	for _, v := range []uint16{Version, VersionBlockNumbered} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) { testCorruptionMatrix(t, v) })
	}
}

func testCorruptionMatrix(t *testing.T, v uint16) {
	c := makeContent(40, func(i int) int {
		if i == 20 {
			return 5000 // a block of two pages
		}
		return 60 + i%37
	}, true)
	img := c.encodeVersion(t, v)
	if r, err := Open(memFile(t, img)); err != nil || r.nblocks < 3 || r.version != v {
		t.Fatalf("the image is not what the matrix needs: %v", err)
	}
	// One bit of every byte, and every bit of one byte in five, each
	// flipped in the file and put back.
	fs, name := memFile(t, img)
	f, err := fs.OpenReadWrite(name)
	must(t, err)
	defer f.Close()
	for off := range img {
		for _, mask := range []byte{0x01, 0xff} {
			if mask == 0xff && off%5 != 0 {
				continue
			}
			_, err := f.WriteAt([]byte{img[off] ^ mask}, int64(off))
			must(t, err)
			checkDamaged(t, fs, name, c, off)
			_, err = f.WriteAt(img[off:off+1], int64(off))
			must(t, err)
		}
	}
}

// checkDamaged opens name, c's image damaged at off, and checks every
// read against c.
func checkDamaged(t *testing.T, fs vfs.FS, name string, c *content, off int) {
	t.Helper()
	r, err := Open(fs, name)
	if err != nil {
		// A flip of the version may make it another version this
		// reader reads, whose layout the file then fails.
		if !isCorrupt(err, name) && !((off == 6 || off == 7) && errors.Is(err, snapshot.ErrVersion)) {
			t.Fatalf("flip at %d: Open: %v, want ErrCorrupt (or, of the version, ErrVersion)", off, err)
		}
		return
	}
	defer r.Close()
	noticed := false
	check := func(what string, err error) bool {
		if err == nil {
			return true
		}
		if !isCorrupt(err, name) {
			t.Fatalf("flip at %d: %s: %v, want ErrCorrupt", off, what, err)
		}
		noticed = true
		return false
	}
	want := map[string]*record.Entry{}
	for i := range c.entries {
		e := &c.entries[i]
		want[string(e.Key)] = e
		got, ok, err := r.Get(e.Key)
		if check("Get", err) && (!ok || !equalEntry(got, e)) {
			t.Fatalf("flip at %d: Get(%q) = %+v, %v: a wrong answer", off, e.Key, got, ok)
		}
		missing := append(bytes.Clone(e.Key), 0)
		if _, ok, err := r.Get(missing); check("Get of a missing key", err) && ok {
			t.Fatalf("flip at %d: Get(%q) of a missing key found it", off, missing)
		}
	}
	n, failed := 0, false
	for e, err := range r.All(nil, nil) {
		if failed = !check("All", err); failed {
			break
		}
		if n >= len(c.entries) || !equalEntry(*e, &c.entries[n]) {
			t.Fatalf("flip at %d: All yields %q as entry %d: a wrong answer", off, e.Key, n)
		}
		n++
	}
	if !failed && n != len(c.entries) {
		t.Fatalf("flip at %d: All ends after %d entries of %d: a wrong answer", off, n, len(c.entries))
	}
	// Seeks, which read the block index (in version 5, an item at a
	// time).
	for i := 0; i < len(c.entries); i += 8 {
		n, failed := i, false
		for e, err := range r.All(c.entries[i].Key, nil) {
			if failed = !check("All from a key", err); failed {
				break
			}
			if n >= len(c.entries) || !equalEntry(*e, &c.entries[n]) {
				t.Fatalf("flip at %d: All from %q yields %q as entry %d: a wrong answer", off, c.entries[i].Key, e.Key, n)
			}
			n++
		}
		if !failed && n != len(c.entries) {
			t.Fatalf("flip at %d: All from %q ends after entry %d of %d: a wrong answer", off, c.entries[i].Key, n, len(c.entries))
		}
	}
	if les, err := r.Leases(); check("Leases", err) && len(les) != len(c.leases) {
		t.Fatalf("flip at %d: %d leases", off, len(les))
	}
	check("Verify", r.Verify())
	if !noticed {
		t.Fatalf("flip at %d: nothing noticed it", off)
	}
}

func equalEntry(got record.Entry, want *record.Entry) bool {
	return bytes.Equal(got.Key, want.Key) && bytes.Equal(got.Value, want.Value) &&
		got.CreateRev == want.CreateRev && got.ModRev == want.ModRev && got.Version == want.Version
}

// TestOpenChecksIndexOrder gives an image's block index a first key not
// above the previous block's, its checksums made to hold again, and
// checks that the walk of the index refuses it at the item's offset: for
// keys shorter than eight bytes, keys that differ in their first eight
// and keys that differ only after them (the walk compares the first
// eight bytes as a number before it compares the rest). The walk is
// Open's in VersionBlockNumbered, Verify's in Version, whose Open reads
// no item. Each image opens before the patch.
func TestOpenChecksIndexOrder(t *testing.T) {
	for _, v := range []uint16{Version, VersionBlockNumbered} {
		for _, format := range []string{"k%06d", "%08d-key", "prefix--%06d"} {
			testIndexOrder(t, v, format)
		}
	}
}

func testIndexOrder(t *testing.T, v uint16, format string) {
	{
		c := makeContent(40, func(int) int { return 900 }, false)
		for i := range c.entries {
			c.entries[i].Key = fmt.Appendf(nil, format, i*3)
		}
		img := c.encodeVersion(t, v)
		r, err := Open(memFile(t, img))
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if r.nblocks < 4 {
			t.Fatalf("%s: %d blocks, the test needs 4", format, r.nblocks)
		}
		itemKey := func(b []byte, i uint64) []byte {
			it := r.itemsOff + itemSize*i
			koff, klen := uint64(u32(b, it+8)), uint64(u32(b, it+12))
			return b[r.keysOff+koff : r.keysOff+koff+klen]
		}
		// The checksummed section: the leases (none) and the block
		// index, whose keys end with the last block's.
		secOff := r.leaseOff
		lastKey := itemKey(img, r.nblocks-1)
		secEnd := r.keysOff + uint64(u32(img, r.itemsOff+itemSize*(r.nblocks-1)+8)) + uint64(len(lastKey))
		r.Close()
		reseal := func(b []byte) { resealSection(b, v, secOff, secEnd) }
		for _, from := range []uint64{1, 0} { // block 2's first key made block 1's (equal), then block 0's (below)
			b := bytes.Clone(img)
			copy(itemKey(b, 2), itemKey(b, from))
			reseal(b)
			fs, name := memFile(t, b)
			patched, err := Open(fs, name)
			what := "Open"
			if v == Version {
				if err != nil {
					t.Fatalf("version %d: %s: Open: %v, want it to read no item", v, format, err)
				}
				what, err = "Verify", patched.Verify()
				patched.Close()
			}
			var ce *corrupt.Error
			if !isCorrupt(err, name) || !errors.As(err, &ce) || ce.Offset != int64(r.itemsOff+2*itemSize) || !strings.Contains(ce.Reason, "not above") {
				t.Errorf("version %d: %s: block 2's first key made block %d's: %s: %v, want ErrCorrupt at the item's offset %d", v, format, from, what, err, r.itemsOff+2*itemSize)
			}
		}
	}
}

// TestScanChecksOrderAcrossBlocks makes a block of a version 5 image
// start below, then at, the last key of the block before it, its
// checksums holding (each covers its block's bytes only): two blocks
// swapped, and a block's first key made the one before's last. A walk
// must refuse the block as not above the one before: version 5 verifies
// a block without the block index, so the order across blocks is the
// walk's to check.
func TestScanChecksOrderAcrossBlocks(t *testing.T) {
	c := makeContent(40, func(int) int { return 900 }, false)
	img := c.encode(t)
	r, err := Open(memFile(t, img))
	must(t, err)
	if r.nblocks < 4 || r.dataPages != r.nblocks {
		t.Fatalf("%d blocks in %d pages, the test needs 4 of a page each", r.nblocks, r.dataPages)
	}
	r.Close()
	swapped := bytes.Clone(img)
	copy(swapped[2*PageSize:3*PageSize], img[3*PageSize:4*PageSize])
	copy(swapped[3*PageSize:4*PageSize], img[2*PageSize:3*PageSize])
	// The block at page 3 starts with the last key of the one at page 2
	// (the keys are of one length), its checksum made again.
	equal := bytes.Clone(img)
	b2, b3 := equal[2*PageSize:3*PageSize], equal[3*PageSize:4*PageSize]
	copy(entryKey(b3, entryAt(b3, 0)), entryKey(b2, entryAt(b2, uint64(u16(b2, 8))-1)))
	binary.LittleEndian.PutUint32(b3, crc(b3[4:]))
	for what, b := range map[string][]byte{"swapped": swapped, "equal": equal} {
		fs, name := memFile(t, b)
		r, err := Open(fs, name)
		must(t, err)
		var last error
		n := 0
		for _, err := range r.All(nil, nil) {
			if last = err; err != nil {
				break
			}
			n++
		}
		var ce *corrupt.Error
		if !isCorrupt(last, name) || !errors.As(last, &ce) || ce.Offset != 3*PageSize || !strings.Contains(ce.Reason, "not above") {
			t.Errorf("%s: All: %d entries, then %v; want ErrCorrupt at offset %d", what, n, last, 3*PageSize)
		}
		if err := r.Verify(); !isCorrupt(err, name) {
			t.Errorf("%s: Verify: %v", what, err)
		}
		r.Close()
	}
}
