package snapshot_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

// The frames of a version 2 snapshot, built from FORMAT.md by hand:
//
//	meta      = type 1: uint64 covered, uint64 revision, uint64 count, uint64 leases
//	lease     = type 4: uint64 id, int64 ttl, int64 deadline, uint64 keys
//	lease key = type 5: the key's bytes
const (
	typeLease    = 4
	typeLeaseKey = 5
)

func specMetaV2(covered, rev, count, leases uint64) []byte {
	return binary.LittleEndian.AppendUint64(specMeta(covered, rev, count), leases)
}

func specLease(id uint64, ttl, deadline int64, keys uint64) []byte {
	p := binary.LittleEndian.AppendUint64(nil, id)
	p = binary.LittleEndian.AppendUint64(p, uint64(ttl))
	p = binary.LittleEndian.AppendUint64(p, uint64(deadline))
	return binary.LittleEndian.AppendUint64(p, keys)
}

// specLeaseFile builds a version 2 snapshot: meta (revision 9, count
// entries), then frames (the lease frames and their keys, as given), then
// the entries and the end frame.
func specLeaseFile(leases uint64, frames func(b []byte) []byte, entries ...*record.Entry) []byte {
	b := specFrame(specHeader(2), typeMeta, specMetaV2(4, 9, uint64(len(entries)), leases))
	b = frames(b)
	for _, e := range entries {
		b = specFrame(b, typeEntry, specEntry(e))
	}
	return specEnd(b, uint64(len(entries)))
}

// TestLeasesGoldenByHand decodes testdata/leases.golden field by field
// from FORMAT.md, without the package's decoder.
func TestLeasesGoldenByHand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "leases.golden"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cursor{t: t, b: b}
	if got := string(c.bytes(6)); got != "KVSNAP" {
		t.Errorf("magic = %q", got)
	}
	if got := c.u16(); got != 2 {
		t.Errorf("version = %d, want 2 (a snapshot with leases)", got)
	}
	frame := func(what string, wantType uint8) *cursor {
		t.Helper()
		start := c.off
		crc, n, typ := c.u32(), c.u32(), c.u8()
		if typ != wantType {
			t.Fatalf("%s frame at %d: type %d, want %d", what, start, typ, wantType)
		}
		payload := c.bytes(int(n))
		if want := crc32.Checksum(b[start+4:start+9+int(n)], castagnoli); crc != want {
			t.Errorf("%s frame at %d: CRC %#08x, want %#08x", what, start, crc, want)
		}
		return &cursor{t: t, b: payload}
	}
	m := frame("meta", typeMeta)
	if got := [4]uint64{m.u64(), m.u64(), m.u64(), m.u64()}; got != [4]uint64{3, 42, 3, 2} {
		t.Errorf("meta (covered, revision, entries, leases) = %v, want [3 42 3 2]", got)
	}
	if len(m.b) != 32 {
		t.Errorf("meta payload of %d bytes, want 32", len(m.b))
	}
	type leaseFields struct {
		ID, TTL, Deadline uint64
		Keys              []string
	}
	var got []leaseFields
	for range 2 {
		l := frame("lease", typeLease)
		f := leaseFields{ID: l.u64(), TTL: l.u64(), Deadline: l.u64()}
		for range l.u64() {
			f.Keys = append(f.Keys, string(frame("lease key", typeLeaseKey).b))
		}
		got = append(got, f)
	}
	want := []leaseFields{
		{ID: 7, TTL: 30e9, Deadline: 1767225600e9, Keys: []string{"alpha", "k\x00\xff"}},
		{ID: 40, TTL: 1e6, Deadline: 1767225601e9},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leases (-want +got):\n%s", diff)
	}
	// The entries and the end frame follow as in version 1.
	for range 3 {
		frame("entry", typeEntry)
	}
	endStart := c.off
	e := frame("end", typeEnd)
	if n, crc := e.u64(), e.u32(); n != 3 || crc != crc32.Checksum(b[:endStart], castagnoli) {
		t.Errorf("end frame: count %d, CRC %#08x", n, crc)
	}
	if c.off != len(b) {
		t.Errorf("%d bytes after the end frame", len(b)-c.off)
	}
}

// TestLeaseRules: each rule of a version 2 snapshot's lease frames, broken
// in a file built by hand, is ErrCorrupt at the frame that breaks it.
func TestLeaseRules(t *testing.T) {
	a, b, c := entry("a", "1", 1, 2, 1), entry("b", "", 3, 3, 1), entry("c", "x", 1, 9, 4)
	const lease1 = 8 + 9 + 32 // the first lease frame
	lease := func(id uint64, ttl, deadline int64, keys ...string) func([]byte) []byte {
		return func(f []byte) []byte {
			f = specFrame(f, typeLease, specLease(id, ttl, deadline, uint64(len(keys))))
			for _, k := range keys {
				f = specFrame(f, typeLeaseKey, []byte(k))
			}
			return f
		}
	}
	then := func(fs ...func([]byte) []byte) func([]byte) []byte {
		return func(f []byte) []byte {
			for _, fn := range fs {
				f = fn(f)
			}
			return f
		}
	}
	const key1 = lease1 + 9 + 32 // the first lease's first key frame
	tests := []struct {
		name    string
		file    []byte
		want    []record.Lease // when valid
		wantOff int64          // when corrupt
	}{
		{name: "valid", file: specLeaseFile(2, then(lease(2, 5, 100, "a", "c"), lease(9, 1, 1, "b")), a, b, c),
			want: []record.Lease{{ID: 2, TTL: 5, Deadline: 100, Keys: [][]byte{[]byte("a"), []byte("c")}},
				{ID: 9, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("b")}}}},
		{name: "valid, a lease without keys", file: specLeaseFile(1, lease(3, 5, 100), a),
			want: []record.Lease{{ID: 3, TTL: 5, Deadline: 100}}},
		{name: "valid, built by EncodeLeases", file: encodeLeases(t, snapshot.Meta{Covered: 4, Revision: 9, Count: 3},
			[]record.Lease{{ID: 2, TTL: 5, Deadline: 100, Keys: [][]byte{[]byte("a"), []byte("c")}}, {ID: 9, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("b")}}},
			[]*record.Entry{a, b, c}),
			want: []record.Lease{{ID: 2, TTL: 5, Deadline: 100, Keys: [][]byte{[]byte("a"), []byte("c")}},
				{ID: 9, TTL: 1, Deadline: 1, Keys: [][]byte{[]byte("b")}}}},
		{name: "version 2 with a version 1 meta", file: specEnd(specFrame(specHeader(2), typeMeta, specMeta(4, 9, 0)), 0), wantOff: 8},
		{name: "version 1 with a version 2 meta", file: specEnd(specFrame(specHeader(1), typeMeta, specMetaV2(4, 9, 0, 1)), 0), wantOff: 8},
		{name: "version 2 with no lease", file: specLeaseFile(0, then(), a), wantOff: 8},
		{name: "fewer lease frames than meta says", file: specLeaseFile(2, lease(3, 5, 100, "a"), a), wantOff: lease1 + 9 + 32 + 10},
		{name: "an entry where a lease frame goes", file: specLeaseFile(1, then(), a), wantOff: lease1},
		{name: "lease frame of 31 bytes", file: specLeaseFile(1, func(f []byte) []byte {
			return specFrame(f, typeLease, specLease(3, 5, 100, 0)[:31])
		}, a), wantOff: lease1},
		{name: "lease id 0", file: specLeaseFile(1, lease(0, 5, 100), a), wantOff: lease1},
		{name: "lease id past the revision", file: specLeaseFile(1, lease(10, 5, 100), a), wantOff: lease1},
		{name: "lease ids out of order", file: specLeaseFile(2, then(lease(5, 5, 100), lease(3, 5, 100)), a), wantOff: lease1 + 9 + 32},
		{name: "lease id twice", file: specLeaseFile(2, then(lease(5, 5, 100), lease(5, 5, 100)), a), wantOff: lease1 + 9 + 32},
		{name: "ttl 0", file: specLeaseFile(1, lease(3, 0, 100), a), wantOff: lease1},
		{name: "negative deadline", file: specLeaseFile(1, lease(3, 5, -1), a), wantOff: lease1},
		{name: "key count past the file", file: specLeaseFile(1, func(f []byte) []byte {
			return specFrame(f, typeLease, specLease(3, 5, 100, 1<<40))
		}, a), wantOff: lease1},
		{name: "an entry where a key frame goes", file: specLeaseFile(1, func(f []byte) []byte {
			return specFrame(f, typeLease, specLease(3, 5, 100, 1))
		}, a), wantOff: key1},
		{name: "keys out of order", file: specLeaseFile(1, lease(3, 5, 100, "c", "a"), a, c), wantOff: key1 + 10},
		{name: "key twice in a lease", file: specLeaseFile(1, lease(3, 5, 100, "a", "a"), a), wantOff: key1 + 10},
		{name: "key bound to two leases", file: specLeaseFile(2, then(lease(3, 5, 100, "a"), lease(4, 5, 100, "a")), a), wantOff: key1 + 10},
		{name: "key bound but not an entry, before the entries", file: specLeaseFile(1, lease(3, 5, 100, "0"), a), wantOff: lease1},
		{name: "key bound but not an entry, between", file: specLeaseFile(1, lease(3, 5, 100, "a", "bb"), a, c), wantOff: lease1},
		{name: "key bound but not an entry, after", file: specLeaseFile(1, lease(3, 5, 100, "d"), a, c), wantOff: lease1},
		{name: "lease frame after the entries", file: specEnd(specFrame(specFrame(specFrame(specHeader(2), typeMeta, specMetaV2(4, 9, 1, 1)),
			typeEntry, specEntry(a)), typeLease, specLease(3, 5, 100, 0)), 1), wantOff: lease1},
		{name: "lease frame in version 1", file: specEnd(specFrame(specFrame(specHeader(1), typeMeta, specMeta(4, 9, 0)),
			typeLease, specLease(3, 5, 100, 0)), 0), wantOff: 8 + 9 + 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decode(tt.file)
			if tt.want == nil {
				checkCorrupt(t, err, snapshot.ErrCorrupt, "snapshot", tt.wantOff)
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, d.Leases, equateEmpty); diff != "" {
				t.Errorf("leases (-want +got):\n%s", diff)
			}
			if d.Meta.Leases != uint64(len(tt.want)) {
				t.Errorf("Meta.Leases = %d, want %d", d.Meta.Leases, len(tt.want))
			}
			// Decode, which does not stream leases, checks them all the
			// same and yields the entries.
			var n int
			if err := snapshot.Decode(tt.file, nil, func(*record.Entry) error { n++; return nil }); err != nil || n != len(d.Entries) {
				t.Errorf("Decode without a lease callback: %v, %d entries", err, n)
			}
		})
	}
}

// TestLeaseBitFlipsAndCuts: every byte of the golden snapshot with leases
// flipped, and every cut of it, is refused as corruption (or, in the
// version field, as a version this build does not read) at the damaged
// frame.
func TestLeaseBitFlipsAndCuts(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "leases.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(good); err != nil {
		t.Fatal(err)
	}
	starts := frameStarts(good)
	for i := range len(good) {
		b := slices.Clone(good)
		b[i] ^= 0x10
		_, err := decode(b)
		want, off := snapshot.ErrCorrupt, int64(0)
		switch {
		case i < 6:
		case i < 8:
			// 2 XOR 0x10 is 18 (or the high byte is set): a version
			// this build does not read.
			want, off = snapshot.ErrVersion, 6
		default:
			off = frameOf(starts, int64(i))
		}
		t.Run(fmt.Sprintf("flip byte %d", i), func(t *testing.T) { checkCorrupt(t, err, want, "snapshot", off) })
	}
	for n := range len(good) {
		_, err := decode(good[:n])
		if err == nil {
			t.Errorf("a cut at %d of %d decoded", n, len(good))
		}
	}
}
