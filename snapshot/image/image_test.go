package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// TestXXH64 checks the key hash against the reference implementation's
// values (as github.com/cespare/xxhash/v2 computes them), in every branch:
// short keys, the 32-byte stripes, the 8-, 4- and 1-byte tails, a seed.
func TestXXH64(t *testing.T) {
	tests := []struct {
		in   string
		seed uint64
		want uint64
	}{
		{"", 0, 0xef46db3751d8e999},
		{"a", 0, 0xd24ec4f1a98c6e5b},
		{"abc", 0, 0x44bc2cf5ad770999},
		{"0123456789abcdef0123456789abcdef!", 0, 0x8afff4daac4e677e},
		{"the quick brown fox jumps over the lazy dog, 64 bytes or more...........", 0, 0x94fc1dd176ee2452},
		{"0123456789abcdef0123456789abcdef!", 12345, 0x6542508015c15f85},
		{"abc", 12345, 0x01700e64f6f23509},
	}
	for _, tc := range tests {
		if got := xxh64([]byte(tc.in), tc.seed); got != tc.want {
			t.Errorf("xxh64(%q, %d) = %016x, want %016x", tc.in, tc.seed, got, tc.want)
		}
	}
}

// TestRoundTrip writes images of several shapes and reads every entry
// back by key and in order, on the in-memory file system (a copy) and the
// OS (a mapping).
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    *content
	}{
		{"empty", makeContent(0, nil, false)},
		{"one", makeContent(1, func(int) int { return 3 }, false)},
		{"one empty value", makeContent(1, func(int) int { return 0 }, false)},
		{"blocks", makeContent(3000, func(i int) int { return i % 90 }, false)},
		{"big entries", makeContent(40, func(i int) int {
			if i%9 == 4 {
				return 4096*(i%3) + 4050 + i
			}
			return 100
		}, false)},
		{"exactly one page", makeContent(3, func(i int) int { return PageSize - blockHeaderSize - 2 - entryFixed - 7 }, false)},
		{"one byte past a page", makeContent(3, func(i int) int { return PageSize - blockHeaderSize - 2 - entryFixed - 6 }, false)},
		{"leases", makeContent(500, func(i int) int { return 20 }, true)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := tc.c.encode(t)
			if len(img)%PageSize != FooterSize {
				t.Errorf("image of %d bytes: not pages and a footer", len(img))
			}
			memFS, memName := memFile(t, img)
			for _, fs := range []struct {
				name string
				fsys vfs.FS
				file string
				mmap bool
			}{{"mem", memFS, memName, false}, {"os", vfs.OS, osFile(t, img), true}} {
				t.Run(fs.name, func(t *testing.T) {
					r, err := Open(fs.fsys, fs.file)
					must(t, err)
					defer r.Close()
					if r.m.Mapped() != fs.mmap {
						t.Errorf("Mapped() = %v", r.m.Mapped())
					}
					checkReader(t, r, tc.c)
				})
			}
		})
	}
}

// checkReader compares everything r serves with c.
func checkReader(t *testing.T, r *Reader, c *content) {
	t.Helper()
	want := c.meta
	want.Count, want.Leases = uint64(len(c.entries)), uint64(len(c.leases))
	if diff := cmp.Diff(want, r.Meta()); diff != "" {
		t.Errorf("meta (-want +got):\n%s", diff)
	}
	if r.Len() != len(c.entries) || r.Revision() != c.meta.Revision || r.Covered() != c.meta.Covered {
		t.Errorf("Len, Revision, Covered = %d, %d, %d", r.Len(), r.Revision(), r.Covered())
	}
	var buf []byte
	for i := range c.entries {
		e := &c.entries[i]
		got, ok, err := r.Get(e.Key)
		if err != nil || !ok {
			t.Fatalf("Get(%q): %v, %v", e.Key, ok, err)
		}
		if diff := cmp.Diff(*e, got); diff != "" {
			t.Fatalf("Get(%q) (-want +got):\n%s", e.Key, diff)
		}
		got, buf, ok, err = r.GetAppend(buf[:0], e.Key)
		if err != nil || !ok || !bytes.Equal(got.Value, e.Value) || !bytes.Equal(got.Key, e.Key) {
			t.Fatalf("GetAppend(%q): %v, %v", e.Key, ok, err)
		}
		// A key between two: absent.
		missing := append(bytes.Clone(e.Key), 'x')
		if _, ok, err := r.Get(missing); ok || err != nil {
			t.Fatalf("Get(%q) of a missing key: %v, %v", missing, ok, err)
		}
	}
	all, err := collect(r, nil, nil)
	must(t, err)
	if diff := cmp.Diff(c.entries, all, cmpEmpty); diff != "" {
		t.Errorf("All (-want +got):\n%s", diff)
	}
	// AllOnce, which drops the pages behind it (here every page; twice:
	// the second walk reads pages the first dropped), serves the same.
	defer func(step uint64) { dropStep = step }(dropStep)
	dropStep = PageSize
	for range 2 {
		once, err := collectWalk(r.AllOnce(nil, nil))
		must(t, err)
		if diff := cmp.Diff(c.entries, once, cmpEmpty); diff != "" {
			t.Errorf("AllOnce (-want +got):\n%s", diff)
		}
	}
	if n := len(c.entries); n > 2 {
		// A range from between two keys to a key: the ones in between.
		lo, hi := n/3, 2*n/3
		start := append(bytes.Clone(c.entries[lo].Key[:len(c.entries[lo].Key)-1]), c.entries[lo].Key[len(c.entries[lo].Key)-1]-1, 'z')
		got, err := collect(r, start, c.entries[hi].Key)
		must(t, err)
		if diff := cmp.Diff(c.entries[lo:hi], got, cmpEmpty); diff != "" {
			t.Errorf("All(%q, %q) (-want +got):\n%s", start, c.entries[hi].Key, diff)
		}
		got, err = collect(r, []byte("zzz"), nil)
		if err != nil || len(got) != 0 {
			t.Errorf("All past the last key: %d entries, %v", len(got), err)
		}
	}
	les, err := r.Leases()
	must(t, err)
	if diff := cmp.Diff(c.leases, les, cmpEmpty); diff != "" {
		t.Errorf("leases (-want +got):\n%s", diff)
	}
	must(t, r.Verify())
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

// TestWriterRefuses checks that a Writer refuses what would make an image
// that a reader refuses.
func TestWriterRefuses(t *testing.T) {
	meta := snapshot.Meta{Covered: 1, Revision: 10}
	e := func(k string, c, m record.Revision) record.Entry {
		return record.Entry{Key: []byte(k), Value: []byte("v"), CreateRev: c, ModRev: m, Version: 1}
	}
	tests := []struct {
		name    string
		entries []record.Entry
		leases  []record.Lease
	}{
		{"keys out of order", []record.Entry{e("b", 1, 1), e("a", 1, 1)}, nil},
		{"same key twice", []record.Entry{e("a", 1, 1), e("a", 1, 2)}, nil},
		{"mod revision past the snapshot", []record.Entry{e("a", 1, 11)}, nil},
		{"create after mod", []record.Entry{e("a", 3, 2)}, nil},
		{"create revision 0", []record.Entry{e("a", 0, 2)}, nil},
		{"a lease binds a missing key", []record.Entry{e("a", 1, 1), e("c", 1, 1)},
			[]record.Lease{{ID: 1, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("b")}}}},
		{"a lease binds a key past the last", []record.Entry{e("a", 1, 1)},
			[]record.Lease{{ID: 1, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("b")}}}},
		{"a key bound twice", []record.Entry{e("a", 1, 1)},
			[]record.Lease{{ID: 1, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("a")}}, {ID: 2, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("a")}}}},
		{"leases out of order", []record.Entry{e("a", 1, 1)},
			[]record.Lease{{ID: 2, TTL: 1, Deadline: 1}, {ID: 1, TTL: 1, Deadline: 1}}},
		{"lease past the revision", nil, []record.Lease{{ID: 11, TTL: 1, Deadline: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &content{meta: meta, entries: tc.entries, leases: tc.leases}
			var buf bytes.Buffer
			if err := Encode(&buf, c.meta, c.leases, c.seq(), Options{Seed: 1}); err == nil {
				t.Errorf("Encode: no error")
			}
		})
	}
}

// TestWrite publishes an image and reads its meta frame back.
func TestWrite(t *testing.T) {
	fs := vfs.NewMem()
	must(t, fs.MkdirAll("d", 0o755))
	c := makeContent(100, func(int) int { return 10 }, true)
	must(t, Write(fs, "d", snapshot.Name, c.meta, c.leases, c.seq(), Options{}))
	names, err := fs.List("d")
	must(t, err)
	if diff := cmp.Diff([]string{snapshot.Name}, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	meta, err := ReadMeta(fs, "d/snapshot")
	must(t, err)
	if meta.Covered != c.meta.Covered || meta.Revision != c.meta.Revision {
		t.Errorf("ReadMeta: %+v", meta)
	}
	// The snapshot's own reader refuses the image as a version it does
	// not read, not as damage.
	err = snapshot.Read(fs, "d", nil, nil)
	if !errors.Is(err, snapshot.ErrVersion) || isCorrupt(err, "d/snapshot") {
		t.Errorf("snapshot.Read of an image: %v, want ErrVersion", err)
	}
	r, err := Open(fs, "d/snapshot")
	must(t, err)
	defer r.Close()
	checkReader(t, r, c)
	if r.seed == 0 {
		t.Errorf("Options{} wrote seed 0: no seed drawn")
	}
}

// TestOpenRefusesOtherVersions checks that versions 1 and 2 are
// ErrVersion, not corruption.
func TestOpenRefusesOtherVersions(t *testing.T) {
	for _, leases := range []bool{false, true} {
		c := makeContent(3, func(int) int { return 1 }, leases)
		var buf bytes.Buffer
		must(t, snapshot.EncodeLeases(&buf, snapshot.Meta{Covered: 1, Revision: c.meta.Revision, Count: 3}, c.leases, c.seq()))
		fs, name := memFile(t, buf.Bytes())
		_, err := Open(fs, name)
		if !errors.Is(err, snapshot.ErrVersion) || isCorrupt(err, name) {
			t.Errorf("Open of a version %d snapshot: %v", 1+len(c.leases)/2, err)
		}
		if _, err := ReadMeta(fs, name); !errors.Is(err, snapshot.ErrVersion) {
			t.Errorf("ReadMeta of an older snapshot: %v", err)
		}
	}
}

// TestOpenReadsLittle checks the promise that Open reads the first page,
// the footer, the page checksums and the leases and nothing else: an
// image whose data blocks, block index and hash pages are all zeros
// (every checksum in them broken) opens, and only reads fail, a seek
// (which reads the block index) included.
func TestOpenReadsLittle(t *testing.T) {
	c := makeContent(2000, func(int) int { return 50 }, false)
	img := c.encode(t)
	f := img[len(img)-FooterSize:]
	dataEnd := PageSize * (1 + int(u64(f, 16)))
	clear(img[PageSize:dataEnd])
	idxOff := dataEnd + int(u64(f, 32))
	clear(img[idxOff : idxOff+int(u64(f, 40))])
	hashOff := len(img) - FooterSize - PageSize*int(u64(f, 48))
	clear(img[hashOff : len(img)-FooterSize])
	fs, name := memFile(t, img)
	r, err := Open(fs, name)
	must(t, err)
	defer r.Close()
	if _, _, err := r.Get(c.entries[5].Key); !isCorrupt(err, name) {
		t.Errorf("Get from a zeroed image: %v", err)
	}
	if _, err := collect(r, nil, nil); !isCorrupt(err, name) {
		t.Errorf("All over zeroed blocks: %v", err)
	}
	if _, err := collect(r, c.entries[1000].Key, nil); !isCorrupt(err, name) {
		t.Errorf("All from a key, over a zeroed block index: %v", err)
	}
}

// TestClosed checks that every method refuses after Close.
func TestClosed(t *testing.T) {
	c := makeContent(10, func(int) int { return 5 }, true)
	fs, name := memFile(t, c.encode(t))
	r, err := Open(fs, name)
	must(t, err)
	must(t, r.Close())
	must(t, r.Close())
	if _, _, err := r.Get(c.entries[0].Key); !errors.Is(err, ErrClosed) {
		t.Errorf("Get: %v", err)
	}
	if _, err := collect(r, nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("All: %v", err)
	}
	if _, err := r.Leases(); !errors.Is(err, ErrClosed) {
		t.Errorf("Leases: %v", err)
	}
	if err := r.Verify(); !errors.Is(err, ErrClosed) {
		t.Errorf("Verify: %v", err)
	}
}

// TestAnyNamesEveryVersion gives the readers of a data directory's
// snapshot a header of a version no reader here reads (0, and 6, a
// future image's): each refuses it with ErrVersion naming the file and
// every version this build reads, 1 to 5, where package snapshot's
// reader would name its own two; SalvageAny, which never fails on
// damage, does not refuse it.
func TestAnyNamesEveryVersion(t *testing.T) {
	for _, v := range []uint16{0, Version + 1} {
		b := binary.LittleEndian.AppendUint16([]byte("KVSNAP"), v)
		b = append(b, make([]byte, 3*PageSize)...)
		fs, name := memFile(t, b)
		want := fmt.Sprintf("version %d, this build reads versions 1 to %d", v, Version)
		for what, err := range map[string]error{
			"ReadAny":     ReadAny(fs, name, nil, nil, nil),
			"OpenAny":     func() error { _, err := OpenAny(fs, name, nil, nil, nil); return err }(),
			"ReadAnyMeta": func() error { _, err := ReadAnyMeta(fs, name); return err }(),
		} {
			var ce *corrupt.Error
			if !errors.Is(err, snapshot.ErrVersion) || !errors.As(err, &ce) || ce.File != name || !strings.Contains(ce.Reason, want) {
				t.Errorf("%s of a version %d header: %v, want ErrVersion saying %q", what, v, err, want)
			}
		}
		if _, err := SalvageAny(fs, name, nil); err != nil {
			t.Errorf("SalvageAny of a version %d header: %v", v, err)
		}
	}
}
