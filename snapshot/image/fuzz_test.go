package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

// FuzzOpen reads arbitrary bytes as an image: Open, Get, Has, All,
// AllStable, Leases and Verify return data or a typed error
// (snapshot.ErrCorrupt naming the file, or ErrVersion), never panic; Has
// agrees with Get; and an image that Verify accepts serves through Get
// every entry All yields, the same, and every entry AllStable yielded
// before, whose bytes are still the caller's.
func FuzzOpen(f *testing.F) {
	for _, c := range []*content{
		makeContent(0, nil, false),
		makeContent(3, func(int) int { return 2 }, true),
		makeContent(150, func(i int) int { return i % 7 }, true),
		makeContent(3, func(i int) int { return 4100 * (i % 2) }, false),
	} {
		f.Add(c.encode(f))
	}
	for _, v := range []uint16{VersionNamedByPosition, VersionBlockNumbered, Version} {
		img, _ := handBuilt(v, 9)
		f.Add(img)
	}
	keys := [][]byte{[]byte("k000000"), []byte("k000003"), []byte("k000006"), []byte("k000447"), []byte(""), []byte("zz"), []byte("a"), []byte("b")}
	f.Fuzz(func(t *testing.T, b []byte) { checkFuzzed(t, b, keys) })
}

// FuzzOpenRechecked patches a valid image and then makes its checksums
// hold again (every checksum of the image as laid out before the patch),
// so that the checks behind the checksums are what the fuzzer meets:
// random bytes rarely pass a CRC-32C. The same rules as FuzzOpen hold.
func FuzzOpenRechecked(f *testing.F) {
	var images [][]byte
	for _, c := range []*content{
		makeContent(3, func(int) int { return 2 }, true),
		makeContent(150, func(i int) int { return i % 7 }, true),
		makeContent(3, func(i int) int { return 4100 * (i % 2) }, false),
	} {
		images = append(images, c.encode(f), c.encodeVersion(f, VersionBlockNumbered))
	}
	f.Add(uint8(0), uint32(4096+12), []byte{0x20})
	f.Add(uint8(1), uint32(0), []byte{})
	f.Add(uint8(2), uint32(8200), []byte{1, 2, 3})
	keys := [][]byte{[]byte("k000000"), []byte("k000003"), []byte("k000006"), []byte("k000447"), []byte(""), []byte("zz")}
	f.Fuzz(func(t *testing.T, which uint8, off uint32, patch []byte) {
		img := bytes.Clone(images[int(which)%len(images)])
		fs, name := memFile(t, img)
		r, err := Open(fs, name)
		if err != nil {
			t.Fatal(err)
		}
		secEnd := r.leaseOff + u64(img, uint64(len(img))-FooterSize+32) + u64(img, uint64(len(img))-FooterSize+40)
		copy(img[min(int(off), len(img)):], patch)
		le := binary.LittleEndian
		le.PutUint32(img[8:], crc(img[8+4:8+metaFrameSize]))
		for i := range r.nblocks {
			page, pages, _ := r.item(i)
			blk := img[page*PageSize : (page+pages)*PageSize]
			le.PutUint32(blk, crc(blk[4:]))
		}
		for p := range r.hashPages {
			pg := img[r.hashOff+p*PageSize : r.hashOff+(p+1)*PageSize]
			le.PutUint32(pg, crc(pg[4:]))
		}
		resealSection(img, r.version, r.leaseOff, secEnd)
		r.Close()
		checkFuzzed(t, img, keys)
	})
}

// checkFuzzed reads b as an image and checks that every answer is data
// or a typed error, and that a Verify'd image is consistent.
func checkFuzzed(t *testing.T, b []byte, keys [][]byte) {
	fs, name := memFile(t, b)
	typed := func(err error) {
		if err != nil && !isCorrupt(err, name) && !errors.Is(err, snapshot.ErrVersion) {
			t.Fatalf("untyped error: %v", err)
		}
	}
	r, err := Open(fs, name)
	if err != nil {
		typed(err)
		return
	}
	defer r.Close()
	_ = r.Len()
	for _, k := range keys {
		e, ok, err := r.Get(k)
		typed(err)
		has, herr := r.Has(k)
		typed(herr)
		if err == nil && herr == nil && has != ok {
			t.Fatalf("Has(%q) = %v, Get found it: %v (%q)", k, has, ok, e.Value)
		}
	}
	n := 0
	for _, err := range r.All(nil, nil) {
		typed(err)
		if n++; n > 10000 {
			break
		}
	}
	for _, k := range keys {
		// A seek: the block index, read one item at a time.
		n = 0
		for _, err := range r.All(k, nil) {
			typed(err)
			if n++; n > 100 {
				break
			}
		}
	}
	n = 0
	var kept []record.Entry
	for e, err := range r.AllStable(nil, nil) {
		typed(err)
		if err != nil {
			break
		}
		kept = append(kept, *e)
		if n++; n > 10000 {
			break
		}
	}
	_, err = r.Leases()
	typed(err)
	if err := r.Verify(); err != nil {
		typed(err)
		return
	}
	// What AllStable yielded, before Verify, is still the image's: its
	// entries' bytes are the caller's.
	for i := range kept {
		got, ok, err := r.Get(kept[i].Key)
		if err != nil || !ok || !bytes.Equal(got.Value, kept[i].Value) {
			t.Fatalf("an entry AllStable yielded reads %q = %q, Get %q (%v, %v)", kept[i].Key, kept[i].Value, got.Value, ok, err)
		}
	}
	for e, err := range r.All(nil, nil) {
		if err != nil {
			t.Fatalf("All after Verify: %v", err)
		}
		got, ok, err := r.Get(e.Key)
		if err != nil || !ok || !bytes.Equal(got.Value, e.Value) || got.ModRev != e.ModRev {
			t.Fatalf("Get(%q) after Verify: %v, %v", e.Key, ok, err)
		}
	}
}
