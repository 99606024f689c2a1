package image

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

// TestHandBuilt builds an image byte by byte from FORMAT.md ("Snapshot
// image"), without the Writer's code, and checks that the Writer writes
// the same bytes and that the Reader reads them: the writer and the
// reader cannot drift from the spec together. The images of version 3,
// whose hash slots name an entry by its position, which no Writer writes
// any more, and of version 4, which only the tests' Writer writes, must
// still read.
func TestHandBuilt(t *testing.T) {
	for _, version := range []uint16{3, 4, 5} {
		t.Run(fmt.Sprintf("version %d", version), func(t *testing.T) { testHandBuilt(t, version) })
	}
}

func testHandBuilt(t *testing.T, version uint16) {
	const seed = 9
	img, c := handBuilt(version, seed)
	var buf bytes.Buffer
	if version >= VersionBlockNumbered {
		must(t, Encode(&buf, c.meta, c.leases, c.seq(), Options{Seed: seed, version: version}))
	}
	if got := buf.Bytes(); version >= VersionBlockNumbered && !bytes.Equal(got, img) {
		for i := range min(len(got), len(img)) {
			if got[i] != img[i] {
				t.Fatalf("the Writer's image differs from the spec's at offset %d (%d bytes, want %d)", i, len(got), len(img))
			}
		}
		t.Fatalf("the Writer's image is %d bytes, the spec's %d", len(got), len(img))
	}
	fs, name := memFile(t, img)
	r, err := Open(fs, name)
	must(t, err)
	defer r.Close()
	checkReader(t, r, c)
	must(t, r.Verify())
}

// handBuilt returns the image of two entries and a lease that FORMAT.md
// describes, in the given version, built byte by byte, and its content.
func handBuilt(version uint16, seed uint64) ([]byte, *content) {
	le := binary.LittleEndian
	tab := crc32.MakeTable(crc32.Castagnoli)
	type ent struct {
		key, value         string
		create, mod, verse uint64
	}
	ents := []ent{{"a", "1", 1, 1, 1}, {"b", "xy", 2, 3, 2}}

	// Page 0: magic, version, the meta frame (covered 4, revision 3).
	var img []byte
	img = append(img, "KVSNAP"...)
	img = le.AppendUint16(img, version)
	var frame []byte
	frame = le.AppendUint32(frame, 16)
	frame = append(frame, 1)
	frame = le.AppendUint64(frame, 4)
	frame = le.AppendUint64(frame, 3)
	img = le.AppendUint32(img, crc32.Checksum(frame, tab))
	img = append(img, frame...)
	img = append(img, make([]byte, 4096-len(img))...)

	// Page 1: one block of both entries.
	var body []byte
	var offs []uint16
	for _, e := range ents {
		offs = append(offs, uint16(12+2*len(ents)+len(body)))
		body = le.AppendUint64(body, e.create)
		body = le.AppendUint64(body, e.mod)
		body = le.AppendUint64(body, e.verse)
		body = le.AppendUint32(body, uint32(len(e.key)))
		body = append(body, e.key...)
		body = le.AppendUint32(body, uint32(len(e.value)))
		body = append(body, e.value...)
	}
	blk := le.AppendUint32(nil, 1) // pages
	blk = le.AppendUint16(blk, uint16(len(ents)))
	blk = le.AppendUint16(blk, 0)
	for _, o := range offs {
		blk = le.AppendUint16(blk, o)
	}
	blk = append(blk, body...)
	blk = append(blk, make([]byte, 4092-len(blk))...)
	img = le.AppendUint32(img, crc32.Checksum(blk, tab))
	img = append(img, blk...)

	// The lease section (lease 2 binds "b"), then the block index.
	var sec []byte
	sec = le.AppendUint64(sec, 2)
	sec = le.AppendUint64(sec, 5e9)
	sec = le.AppendUint64(sec, 1e18)
	sec = le.AppendUint32(sec, 1)
	sec = le.AppendUint32(sec, 1)
	sec = append(sec, 'b')
	leaseLen := len(sec)
	sec = le.AppendUint64(sec, 1) // block 0 at page 1
	sec = le.AppendUint32(sec, 0) // its first key at 0
	sec = le.AppendUint32(sec, 1) // of 1 byte
	sec = append(sec, 'a')
	img = append(img, sec...)
	sum := crc32.Checksum(sec, tab)
	if version == 5 {
		// The page checksum table: the section is one page's worth.
		table := le.AppendUint32(nil, crc32.Checksum(sec, tab))
		img = append(img, table...)
		sum = crc32.Checksum(table, tab)
	}
	img = append(img, make([]byte, 3*4096-len(img))...)

	// One hash page: 511 slots for 2 entries.
	slots := make([]uint64, 511)
	for i, e := range ents {
		h := xxh64([]byte(e.key), seed)
		j := (h & (1<<40 - 1)) * 511 >> 40
		for slots[j] != 0 {
			j = (j + 1) % 511
		}
		if version == 3 {
			// Bits 0-7 the position in the block, 8-39 the block, 40
			// set, 41-63 the hash's top bits.
			slots[j] = h>>41<<41 | 1<<40 | 0<<8 | uint64(i)
		} else {
			// Bits 0-11 the offset in the block, 12-43 the block (its
			// number 0 in version 4, its first page 1 in version 5), 44
			// set, 45-63 the hash's top bits.
			block := uint64(0)
			if version == 5 {
				block = 1
			}
			slots[j] = h>>45<<45 | 1<<44 | block<<12 | uint64(offs[i])
		}
	}
	page := make([]byte, 4) // zeros
	for _, s := range slots {
		page = le.AppendUint64(page, s)
	}
	img = le.AppendUint32(img, crc32.Checksum(page, tab))
	img = append(img, page...)

	// The footer.
	var f []byte
	for _, v := range []uint64{2, 1, 1, 1, uint64(leaseLen), uint64(len(sec) - leaseLen), 1, seed} {
		f = le.AppendUint64(f, v)
	}
	f = le.AppendUint32(f, sum)
	f = le.AppendUint32(f, crc32.Checksum(f, tab))
	img = append(img, f...)

	c := &content{meta: snapshot.Meta{Covered: 4, Revision: 3},
		leases: []record.Lease{{ID: 2, TTL: 5e9, Deadline: 1e18, Keys: [][]byte{[]byte("b")}}}}
	for _, e := range ents {
		c.entries = append(c.entries, record.Entry{Key: []byte(e.key), Value: []byte(e.value),
			CreateRev: record.Revision(e.create), ModRev: record.Revision(e.mod), Version: int64(e.verse)})
	}
	return img, c
}
