package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The golden snapshot: covered segment 3, revision 42, three entries.
var (
	goldenMeta    = snapshot.Meta{Covered: 3, Revision: 42, Count: 3}
	goldenEntries = []*record.Entry{
		entry("alpha", "1", 1, 1, 1),
		entry("beta", "", 7, 40, 5),
		entry("k\x00\xff", "hello, world", 12, 42, 2),
	}
	// The golden snapshot with leases: the same, with two leases, one
	// binding two of the keys, the other none.
	goldenLeases = []record.Lease{
		{ID: 7, TTL: 30e9, Deadline: 1767225600e9, Keys: [][]byte{[]byte("alpha"), []byte("k\x00\xff")}},
		{ID: 40, TTL: 1e6, Deadline: 1767225601e9},
	}
	goldenLeasesMeta = snapshot.Meta{Covered: 3, Revision: 42, Count: 3, Leases: 2}
)

// testdataFile is a file in testdata/: how it is made, and what decoding
// it must give.
type testdataFile struct {
	name    string
	make    func(t testing.TB) []byte
	want    *decoded // nil when decoding must fail
	wantErr error
	wantOff int64
}

// goldenBytes is the golden snapshot as Encode writes it.
func goldenBytes(t testing.TB) []byte { return encode(t, goldenMeta, goldenEntries) }

// damaged returns the golden snapshot changed by fn.
func damaged(fn func(b []byte) []byte) func(t testing.TB) []byte {
	return func(t testing.TB) []byte { return fn(slices.Clone(goldenBytes(t))) }
}

// testdataFiles are the files in testdata/: the golden snapshots, and
// damaged variants that seed FuzzDecode.
var testdataFiles = []testdataFile{
	{
		name: "snapshot.golden",
		make: goldenBytes,
		want: &decoded{Meta: goldenMeta, Entries: goldenEntries},
	},
	{
		name: "leases.golden",
		make: func(t testing.TB) []byte { return encodeLeases(t, goldenMeta, goldenLeases, goldenEntries) },
		want: &decoded{Meta: goldenLeasesMeta, Entries: goldenEntries, Leases: goldenLeases},
	},
	{
		name: "empty.golden",
		make: func(t testing.TB) []byte { return encode(t, snapshot.Meta{Covered: 1}, nil) },
		want: &decoded{Meta: snapshot.Meta{Covered: 1}},
	},
	{
		name:    "bitflip.bin", // a bit of the second key
		make:    damaged(func(b []byte) []byte { b[88+9+24+4] ^= 0x04; return b }),
		wantErr: snapshot.ErrCorrupt,
		wantOff: 88,
	},
	{
		name:    "truncated.bin", // cut inside the end frame
		make:    damaged(func(b []byte) []byte { return b[:len(b)-5] }),
		wantErr: snapshot.ErrCorrupt,
		wantOff: 189,
	},
	{
		name:    "trailing.bin",
		make:    damaged(func(b []byte) []byte { return append(b, 0) }),
		wantErr: snapshot.ErrCorrupt,
		wantOff: 210,
	},
	{
		name:    "version3.bin",
		make:    damaged(func(b []byte) []byte { b[6] = 3; return b }),
		wantErr: snapshot.ErrVersion,
		wantOff: 6,
	},
	{
		name: "hugeframe.bin", // the second entry frame claims 4 GiB
		make: damaged(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[88+4:], 0xffffffff)
			return b
		}),
		wantErr: snapshot.ErrCorrupt,
		wantOff: 88,
	},
}

// TestGolden compares the files in testdata/ with what the encoder writes
// today (rewrite them with -update) and checks what decoding them gives.
func TestGolden(t *testing.T) {
	for _, tf := range testdataFiles {
		t.Run(tf.name, func(t *testing.T) {
			path := filepath.Join("testdata", tf.name)
			want := tf.make(t)
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("%s differs from what the encoder writes (-want +got):\n%s", path, cmp.Diff(hex.Dump(want), hex.Dump(got)))
			}
			d, err := decode(got)
			if tf.want == nil {
				checkCorrupt(t, err, tf.wantErr, "snapshot", tf.wantOff)
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(*tf.want, d, equateEmpty); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

// cursor reads little-endian fields from a byte slice, for decoding the
// golden file by hand.
type cursor struct {
	t   *testing.T
	b   []byte
	off int
}

func (c *cursor) bytes(n int) []byte {
	c.t.Helper()
	if c.off+n > len(c.b) {
		c.t.Fatalf("need %d bytes at offset %d, file has %d", n, c.off, len(c.b))
	}
	p := c.b[c.off : c.off+n]
	c.off += n
	return p
}

func (c *cursor) u8() uint8   { c.t.Helper(); return c.bytes(1)[0] }
func (c *cursor) u16() uint16 { c.t.Helper(); return binary.LittleEndian.Uint16(c.bytes(2)) }
func (c *cursor) u32() uint32 { c.t.Helper(); return binary.LittleEndian.Uint32(c.bytes(4)) }
func (c *cursor) u64() uint64 { c.t.Helper(); return binary.LittleEndian.Uint64(c.bytes(8)) }

// TestGoldenByHand decodes testdata/snapshot.golden field by field from the
// format spec, without the package's decoder, and checks every field.
func TestGoldenByHand(t *testing.T) {
	// The CRC is CRC-32C (Castagnoli): check the table against the
	// standard check value before trusting it.
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value = %#x, want 0xe3069283", got)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "snapshot.golden"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cursor{t: t, b: b}

	// File header.
	if got := string(c.bytes(6)); got != "KVSNAP" {
		t.Errorf("magic = %q, want %q", got, "KVSNAP")
	}
	if got := c.u16(); got != 1 {
		t.Errorf("version = %d, want 1", got)
	}

	// frame reads a frame header, checks its CRC and type, and returns a
	// cursor over its payload.
	frame := func(what string, wantType uint8, wantLen uint32) *cursor {
		t.Helper()
		start := c.off
		crc := c.u32()
		n := c.u32()
		typ := c.u8()
		if n != wantLen {
			t.Fatalf("%s frame at %d: length %d, want %d", what, start, n, wantLen)
		}
		if typ != wantType {
			t.Errorf("%s frame at %d: type %d, want %d", what, start, typ, wantType)
		}
		payload := c.bytes(int(n))
		if want := crc32.Checksum(b[start+4:start+9+int(n)], castagnoli); crc != want {
			t.Errorf("%s frame at %d: CRC %#08x, want CRC-32C of bytes [%d, %d) = %#08x", what, start, crc, start+4, start+9+int(n), want)
		}
		return &cursor{t: t, b: payload}
	}
	type entryFields struct {
		CreateRev, ModRev, Version uint64
		Key, Value                 string
	}

	// Meta frame, right after the header.
	if c.off != 8 {
		t.Fatalf("meta frame at %d, want 8", c.off)
	}
	m := frame("meta", 1, 24)
	gotMeta := [3]uint64{m.u64(), m.u64(), m.u64()}
	if diff := cmp.Diff([3]uint64{3, 42, 3}, gotMeta); diff != "" {
		t.Errorf("meta (covered, revision, count) (-want +got):\n%s", diff)
	}

	// Entry frames.
	wantEntries := []entryFields{
		{1, 1, 1, "alpha", "1"},
		{7, 40, 5, "beta", ""},
		{12, 42, 2, "k\x00\xff", "hello, world"},
	}
	wantStarts := []int{41, 88, 133}
	for i, want := range wantEntries {
		if c.off != wantStarts[i] {
			t.Errorf("entry %d at offset %d, want %d", i, c.off, wantStarts[i])
		}
		p := frame("entry", 2, uint32(24+4+len(want.Key)+4+len(want.Value)))
		var got entryFields
		got.CreateRev, got.ModRev, got.Version = p.u64(), p.u64(), p.u64()
		got.Key = string(p.bytes(int(p.u32())))
		got.Value = string(p.bytes(int(p.u32())))
		if p.off != len(p.b) {
			t.Errorf("entry %d: %d bytes left in the payload", i, len(p.b)-p.off)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("entry %d (-want +got):\n%s", i, diff)
		}
	}

	// End frame: the count and the CRC-32C of every byte before it.
	endStart := c.off
	if endStart != 189 {
		t.Errorf("end frame at %d, want 189", endStart)
	}
	e := frame("end", 3, 12)
	if got := e.u64(); got != 3 {
		t.Errorf("end frame count = %d, want 3", got)
	}
	if got, want := e.u32(), crc32.Checksum(b[:endStart], castagnoli); got != want {
		t.Errorf("end frame file CRC = %#08x, want CRC-32C of bytes [0, %d) = %#08x", got, endStart, want)
	}
	if c.off != len(b) || len(b) != 210 {
		t.Errorf("file is %d bytes, end frame ends at %d, want both 210", len(b), c.off)
	}
}

// FuzzDecode feeds arbitrary bytes to Decode: it must not panic, must
// fail only with a corruption or version error at an offset inside the
// input, and whatever it accepts must be the canonical encoding of what
// it decoded.
func FuzzDecode(f *testing.F) {
	ents, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	seeds := 0
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		seeds++
	}
	if seeds < len(testdataFiles) {
		f.Fatalf("%d seeds in testdata/, want at least %d (run TestGolden with -update)", seeds, len(testdataFiles))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		// Random bytes almost never pass the checksums; with them fixed,
		// the checks behind them are explored too.
		if fixed := fixChecksums(b); !bytes.Equal(fixed, b) {
			checkDecode(t, fixed)
		}
	})
}

// fixChecksums returns b with the CRC of every whole frame, and the file
// CRC of an end frame of the right size, recomputed.
func fixChecksums(b []byte) []byte {
	b = slices.Clone(b)
	for off := 8; off+9 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		if n > len(b)-off-9 {
			break
		}
		if b[off+8] == typeEnd && n == 12 {
			binary.LittleEndian.PutUint32(b[off+9+8:], crc32.Checksum(b[:off], castagnoli))
		}
		binary.LittleEndian.PutUint32(b[off:], crc32.Checksum(b[off+4:off+9+n], castagnoli))
		off += 9 + n
	}
	return b
}

// checkDecode checks Decode's promises on one input.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	d, err := decode(b)
	if err != nil {
		if !errors.Is(err, snapshot.ErrCorrupt) && !errors.Is(err, snapshot.ErrVersion) {
			t.Fatalf("Decode error %v matches neither ErrCorrupt nor ErrVersion", err)
		}
		var ce *corrupt.Error
		if !errors.As(err, &ce) {
			t.Fatalf("Decode error %v (%T) is not a *corrupt.Error", err, err)
		}
		if ce.File != "snapshot" || ce.Offset < 0 || ce.Offset > int64(len(b)) {
			t.Fatalf("Decode error %v at %s:%d, want snapshot at an offset in [0, %d]", err, ce.File, ce.Offset, len(b))
		}
		return
	}
	if uint64(len(d.Entries)) != d.Meta.Count {
		t.Fatalf("Decode accepted %d entries with meta count %d", len(d.Entries), d.Meta.Count)
	}
	var buf bytes.Buffer
	if err := snapshot.EncodeLeases(&buf, d.Meta, d.Leases, slices.Values(d.Entries)); err != nil {
		t.Fatalf("Encode of decoded snapshot: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), b) {
		t.Fatalf("re-encoding differs from the input: the format is not canonical\ninput % x\noutput % x", b, buf.Bytes())
	}
	d2, err := decode(buf.Bytes())
	if err != nil {
		t.Fatalf("Decode of re-encoded snapshot: %v", err)
	}
	if diff := cmp.Diff(d, d2, equateEmpty); diff != "" {
		t.Fatalf("decode, encode, decode (-first +second):\n%s", diff)
	}
}
