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
// (verifyBlock returning nil at once makes it report wrong values).
func TestCorruptionMatrix(t *testing.T) {
	c := makeContent(40, func(i int) int {
		if i == 20 {
			return 5000 // a block of two pages
		}
		return 60 + i%37
	}, true)
	img := c.encode(t)
	if testing.Short() {
		t.Skip("a flip of every byte")
	}
	if r, err := Open(memFile(t, img)); err != nil || r.nblocks < 3 {
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
		if !isCorrupt(err, name) && !(off == 6 || off == 7) || (off == 6 || off == 7) && !errors.Is(err, snapshot.ErrVersion) {
			t.Fatalf("flip at %d: Open: %v, want ErrCorrupt", off, err)
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
	n := 0
	for e, err := range r.All(nil, nil) {
		if !check("All", err) {
			break
		}
		if n >= len(c.entries) || !equalEntry(*e, &c.entries[n]) {
			t.Fatalf("flip at %d: All yields %q as entry %d: a wrong answer", off, e.Key, n)
		}
		n++
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
// checks that Open refuses it at the item's offset: for keys shorter
// than eight bytes, keys that differ in their first eight and keys that
// differ only after them (Open compares the first eight bytes as a
// number before it compares the rest). Each image opens before the patch.
func TestOpenChecksIndexOrder(t *testing.T) {
	for _, format := range []string{"k%06d", "%08d-key", "prefix--%06d"} {
		c := makeContent(40, func(int) int { return 900 }, false)
		for i := range c.entries {
			c.entries[i].Key = fmt.Appendf(nil, format, i*3)
		}
		img := c.encode(t)
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
		reseal := func(b []byte) {
			fo := b[len(b)-FooterSize:]
			binary.LittleEndian.PutUint32(fo[64:], crc(b[secOff:secEnd]))
			binary.LittleEndian.PutUint32(fo[68:], crc(fo[:68]))
		}
		for _, from := range []uint64{1, 0} { // block 2's first key made block 1's (equal), then block 0's (below)
			b := bytes.Clone(img)
			copy(itemKey(b, 2), itemKey(b, from))
			reseal(b)
			fs, name := memFile(t, b)
			_, err := Open(fs, name)
			var ce *corrupt.Error
			if !isCorrupt(err, name) || !errors.As(err, &ce) || ce.Offset != int64(r.itemsOff+2*itemSize) || !strings.Contains(ce.Reason, "not above") {
				t.Errorf("%s: block 2's first key made block %d's: Open: %v, want ErrCorrupt at the item's offset %d", format, from, err, r.itemsOff+2*itemSize)
			}
		}
	}
}
