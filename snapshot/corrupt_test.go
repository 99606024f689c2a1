package snapshot_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"path"
	"runtime"
	"slices"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

// smallSnapshot is a short snapshot with every frame type, for the
// exhaustive damage tests.
func smallSnapshot(t testing.TB) (snapshot.Meta, []*record.Entry, []byte) {
	entries := []*record.Entry{
		entry("", "e", 1, 2, 2),
		entry("a\x00", "", 3, 3, 1),
		entry("b", "value", 2, 9, 5),
	}
	meta := snapshot.Meta{Covered: 4, Revision: 9, Count: 3}
	return meta, entries, encode(t, meta, entries)
}

// frameOf returns the start of the frame holding byte i.
func frameOf(starts []int64, i int64) int64 {
	s := starts[0]
	for _, st := range starts {
		if st <= i {
			s = st
		}
	}
	return s
}

// TestBitFlips flips bits at every position of a small snapshot: Read
// must refuse each damaged file, naming it and the frame that holds the
// damage (or the header).
func TestBitFlips(t *testing.T) {
	_, _, good := smallSnapshot(t)
	starts := frameStarts(good)
	name := path.Join("d", snapshot.Name)
	m := memWith(t, good)
	if _, err := read(m, "d"); err != nil {
		t.Fatalf("undamaged snapshot: %v", err)
	}
	for i := range int64(len(good)) {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			t.Run(fmt.Sprintf("byte %d mask %#02x", i, mask), func(t *testing.T) {
				b := slices.Clone(good)
				b[i] ^= mask
				want, wantOff := snapshot.ErrCorrupt, int64(0)
				switch {
				case i < 6: // magic
				case i < 8:
					want, wantOff = snapshot.ErrVersion, 6
				default:
					wantOff = frameOf(starts, i)
				}
				putFile(t, m, name, b)
				_, err := read(m, "d")
				checkCorrupt(t, err, want, name, wantOff)
				_, err = decode(b)
				checkCorrupt(t, err, want, "snapshot", wantOff)
			})
		}
	}
}

// TestTruncation cuts a snapshot at every length: each is corrupt, at the
// cut when it falls in a header, else at the frame cut short.
func TestTruncation(t *testing.T) {
	_, _, good := smallSnapshot(t)
	starts := frameStarts(good)
	name := path.Join("d", snapshot.Name)
	m := memWith(t, good)
	for n := range int64(len(good)) {
		t.Run(fmt.Sprintf("length %d", n), func(t *testing.T) {
			wantOff := n
			if n >= 8 {
				if s := frameOf(starts, n); n >= s+9 {
					wantOff = s // the frame's length goes past the end
				}
			}
			putFile(t, m, name, good[:n])
			_, err := read(m, "d")
			checkCorrupt(t, err, snapshot.ErrCorrupt, name, wantOff)
			_, err = decode(good[:n])
			checkCorrupt(t, err, snapshot.ErrCorrupt, "snapshot", wantOff)
		})
	}
}

// TestTrailingBytes appends bytes after the end frame.
func TestTrailingBytes(t *testing.T) {
	_, _, good := smallSnapshot(t)
	starts := frameStarts(good)
	end := good[starts[len(starts)-1]:]
	name := path.Join("d", snapshot.Name)
	tests := []struct {
		name  string
		extra []byte
	}{
		{"one zero byte", []byte{0}},
		{"one byte", []byte{'x'}},
		{"a frame header of zeros", make([]byte, 9)},
		{"a copy of the end frame", end},
		{"a copy of the whole snapshot", good},
		{"a 4 KiB page of zeros", make([]byte, 4096)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append(slices.Clone(good), tc.extra...)
			_, err := read(memWith(t, b), "d")
			checkCorrupt(t, err, snapshot.ErrCorrupt, name, int64(len(good)))
		})
	}
}

// TestMalformed feeds snapshots that pass their checksums but break the
// format's other rules, built by hand from the spec or with Encode (which
// does not check order or revisions).
func TestMalformed(t *testing.T) {
	meta := snapshot.Meta{Covered: 4, Revision: 9, Count: 2}
	metaFrame := func(count uint64) []byte {
		return specFrame(specHeader(1), typeMeta, specMeta(4, 9, count))
	}
	e1, e2 := entry("a", "1", 1, 2, 2), entry("b", "2", 3, 9, 1)
	const entry1 = 8 + 9 + 24                      // offset of the first entry frame
	const entry2 = entry1 + 9 + 24 + 4 + 1 + 4 + 1 // offset of the second
	const end = entry2 + 9 + 24 + 4 + 1 + 4 + 1
	withEntries := func(count uint64, entries ...*record.Entry) []byte {
		b := metaFrame(count)
		for _, e := range entries {
			b = specFrame(b, typeEntry, specEntry(e))
		}
		return b
	}
	// rawEntry builds an entry payload with explicit length fields.
	rawEntry := func(create, mod, version uint64, keylen uint32, key string, vallen uint32, value string) []byte {
		p := binary.LittleEndian.AppendUint64(nil, create)
		p = binary.LittleEndian.AppendUint64(p, mod)
		p = binary.LittleEndian.AppendUint64(p, version)
		p = binary.LittleEndian.AppendUint32(p, keylen)
		p = append(p, key...)
		p = binary.LittleEndian.AppendUint32(p, vallen)
		return append(p, value...)
	}
	bigLength := func(b []byte, n uint32) []byte {
		// A frame header claiming n bytes, with a valid CRC over the
		// header, followed by a little data.
		start := len(b)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, n)
		b = append(b, typeEntry)
		b = append(b, make([]byte, 64)...)
		binary.LittleEndian.PutUint32(b[start:], 0xdeadbeef)
		return b
	}
	tests := []struct {
		name    string
		file    []byte
		want    error // nil: the file is valid
		wantOff int64
	}{
		{name: "valid", file: specEnd(withEntries(2, e1, e2), 2)},
		{name: "valid, built by Encode", file: encode(t, meta, []*record.Entry{e1, e2})},
		{name: "empty file", file: []byte{}, want: snapshot.ErrCorrupt, wantOff: 0},
		{name: "bad magic", file: append([]byte("KVSNAQ\x01\x00"), specEnd(withEntries(0), 0)[8:]...), want: snapshot.ErrCorrupt, wantOff: 0},
		{name: "lower-case magic", file: append([]byte("kvsnap\x01\x00"), specEnd(withEntries(0), 0)[8:]...), want: snapshot.ErrCorrupt, wantOff: 0},
		{name: "version 0", file: append(specHeader(0), specEnd(withEntries(0), 0)[8:]...), want: snapshot.ErrVersion, wantOff: 6},
		{name: "version 3", file: append(specHeader(3), specEnd(withEntries(0), 0)[8:]...), want: snapshot.ErrVersion, wantOff: 6},
		{name: "version 256", file: append(specHeader(256), specEnd(withEntries(0), 0)[8:]...), want: snapshot.ErrVersion, wantOff: 6},
		{name: "header only", file: specHeader(1), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "no end frame", file: withEntries(2, e1, e2), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "first frame is an entry", file: specEnd(specFrame(specHeader(1), typeEntry, specEntry(e1)), 1), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "first frame is the end", file: specEnd(specHeader(1), 0), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "meta of 23 bytes", file: specEnd(specFrame(specHeader(1), typeMeta, specMeta(4, 9, 0)[:23]), 0), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "meta of 25 bytes", file: specEnd(specFrame(specHeader(1), typeMeta, append(specMeta(4, 9, 0), 0)), 0), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "frame type 0", file: specEnd(specFrame(metaFrame(0), 0, nil), 0), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "frame type 4", file: specEnd(specFrame(metaFrame(0), 4, specEntry(e1)), 0), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "second meta frame", file: specEnd(specFrame(metaFrame(0), typeMeta, specMeta(4, 9, 0)), 0), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry of 27 bytes", file: specEnd(specFrame(metaFrame(1), typeEntry, make([]byte, 27)), 1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "key length past the frame", file: specEnd(specFrame(metaFrame(1), typeEntry, rawEntry(1, 1, 1, 5, "a", 1, "1")), 1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "key length 0xffffffff", file: specEnd(specFrame(metaFrame(1), typeEntry, rawEntry(1, 1, 1, 0xffffffff, "a", 1, "1")), 1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "value length short of the frame", file: specEnd(specFrame(metaFrame(1), typeEntry, rawEntry(1, 1, 1, 1, "a", 1, "12")), 1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "value length past the frame", file: specEnd(specFrame(metaFrame(1), typeEntry, rawEntry(1, 1, 1, 1, "a", 3, "12")), 1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "value length 0xffffffff", file: specEnd(specFrame(metaFrame(1), typeEntry, rawEntry(1, 1, 1, 1, "a", 0xffffffff, "12")), 1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry with create revision 0", file: encode(t, meta, []*record.Entry{entry("a", "", 0, 2, 1), e2}), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry with version 0", file: encode(t, meta, []*record.Entry{entry("a", "", 1, 2, 0), e2}), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry with a negative version", file: encode(t, meta, []*record.Entry{entry("a", "", 1, 2, -1), e2}), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "valid at the largest revision", file: encode(t, snapshot.Meta{Covered: 4, Revision: record.MaxRevision, Count: 1},
			[]*record.Entry{entry("a", "1", record.MaxRevision, record.MaxRevision, 1)})},
		{name: "meta revision past the largest", file: specEnd(specFrame(specHeader(1), typeMeta, specMeta(4, uint64(record.MaxRevision)+1, 0)), 0),
			want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "meta revision 2^64-1", file: specEnd(specFrame(specHeader(1), typeMeta, specMeta(4, math.MaxUint64, 0)), 0),
			want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "entry and meta revisions 2^64-1", file: encode(t, snapshot.Meta{Covered: 4, Revision: math.MaxUint64, Count: 1},
			[]*record.Entry{entry("a", "1", math.MaxUint64, math.MaxUint64, 1)}), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "entry revision past the largest", file: encode(t, snapshot.Meta{Covered: 4, Revision: record.MaxRevision, Count: 1},
			[]*record.Entry{entry("a", "1", 1, record.MaxRevision+1, 1)}), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry modified after the snapshot revision", file: encode(t, meta, []*record.Entry{e1, entry("b", "2", 3, 10, 1)}), want: snapshot.ErrCorrupt, wantOff: entry2},
		{name: "entry created after it was modified", file: encode(t, meta, []*record.Entry{e1, entry("b", "2", 5, 4, 1)}), want: snapshot.ErrCorrupt, wantOff: entry2},
		{name: "keys out of order", file: encode(t, meta, []*record.Entry{e2, e1}), want: snapshot.ErrCorrupt, wantOff: entry1 + 9 + 24 + 4 + 1 + 4 + 1},
		{name: "duplicate keys", file: encode(t, meta, []*record.Entry{e1, entry("a", "2", 3, 9, 1)}), want: snapshot.ErrCorrupt, wantOff: entry2},
		{name: "empty key after another key", file: encode(t, meta, []*record.Entry{e1, entry("", "2", 3, 9, 1)}), want: snapshot.ErrCorrupt, wantOff: entry2},
		{name: "key that is a prefix of the previous", file: encode(t, meta, []*record.Entry{entry("ab", "", 1, 1, 1), entry("a", "", 1, 1, 1)}), want: snapshot.ErrCorrupt, wantOff: entry1 + 9 + 24 + 4 + 2 + 4},
		{name: "end count below the entries", file: specEnd(withEntries(2, e1, e2), 1), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "end count above the entries", file: specEnd(withEntries(2, e1, e2), 3), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "meta count below the entries", file: specEnd(withEntries(1, e1, e2), 2), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "meta count above the entries", file: specEnd(withEntries(3, e1, e2), 2), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "end frame of 11 bytes", file: specFrame(withEntries(2, e1, e2), typeEnd, specEnd(nil, 2)[9:9+11]), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "end frame of 13 bytes", file: specFrame(withEntries(2, e1, e2), typeEnd, append(specEnd(withEntries(2, e1, e2), 2)[end+9:], 0)), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "end frame with a wrong file checksum", file: specFrame(withEntries(2, e1, e2), typeEnd, binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64(nil, 2), 0)), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "end frame with the checksum of the entries only", file: func() []byte {
			b := withEntries(2, e1, e2)
			p := binary.LittleEndian.AppendUint64(nil, 2)
			p = binary.LittleEndian.AppendUint32(p, crc32Of(b[entry1:]))
			return specFrame(b, typeEnd, p)
		}(), want: snapshot.ErrCorrupt, wantOff: end},
		{name: "frame after the end frame", file: specFrame(specEnd(withEntries(2, e1, e2), 2), typeEntry, specEntry(entry("c", "", 1, 1, 1))), want: snapshot.ErrCorrupt, wantOff: end + 9 + 12},
		{name: "meta frame length 0xffffffff", file: bigLength(specHeader(1), 0xffffffff), want: snapshot.ErrCorrupt, wantOff: 8},
		{name: "entry frame length 0xffffffff", file: bigLength(metaFrame(1), 0xffffffff), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry frame length 1<<30", file: bigLength(metaFrame(1), 1<<30), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry frame length 1<<30+1", file: bigLength(metaFrame(1), 1<<30+1), want: snapshot.ErrCorrupt, wantOff: entry1},
		{name: "entry frame length one past the end", file: bigLength(metaFrame(1), 65), want: snapshot.ErrCorrupt, wantOff: entry1},
	}
	name := path.Join("d", snapshot.Name)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(memWith(t, tc.file), "d")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Read of a valid snapshot: %v", err)
				}
				return
			}
			checkCorrupt(t, err, tc.want, name, tc.wantOff)
			_, err = decode(tc.file)
			checkCorrupt(t, err, tc.want, "snapshot", tc.wantOff)
		})
	}
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// TestHugeFrameLength checks that a frame claiming 4 GiB fails at once,
// without allocating for it: the length is checked against the file size
// before the payload is read.
func TestHugeFrameLength(t *testing.T) {
	metaFrame := specFrame(specHeader(1), typeMeta, specMeta(4, 9, 1))
	withLength := func(b []byte, n uint32) []byte {
		b = binary.LittleEndian.AppendUint32(slices.Clone(b), 0)
		b = binary.LittleEndian.AppendUint32(b, n)
		b = append(b, typeEntry)
		return append(b, make([]byte, 100)...)
	}
	name := path.Join("d", snapshot.Name)
	tests := []struct {
		name    string
		file    []byte
		wantOff int64
	}{
		{"meta frame", withLength(specHeader(1), 0xffffffff), 8},
		{"entry frame", withLength(metaFrame, 0xffffffff), int64(len(metaFrame))},
		// Within the format's bound on a frame, but past the end of the file.
		{"entry frame of 1 GiB", withLength(metaFrame, 1<<30), int64(len(metaFrame))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := memWith(t, tc.file)
			var err error
			const runs = 20
			// Decode buffers 4 KiB; ReadFile buffers 256 KiB. Either is far
			// from the 4 GiB the frame claims.
			for _, c := range []struct {
				name     string
				maxBytes uint64
				run      func()
			}{
				{"Decode", 64 << 10, func() { _, err = decode(tc.file) }},
				{"Read", 1 << 20, func() { err = snapshot.Read(m, "d", nil, nil) }},
			} {
				allocs := testing.AllocsPerRun(runs, c.run)
				if allocs > 50 {
					t.Errorf("%s: %v allocations per run, want at most 50", c.name, allocs)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for range runs {
					c.run()
				}
				runtime.ReadMemStats(&after)
				if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > c.maxBytes {
					t.Errorf("%s: %d bytes allocated per run, want at most %d", c.name, per, c.maxBytes)
				}
				file := name
				if c.name == "Decode" {
					file = "snapshot"
				}
				checkCorrupt(t, err, snapshot.ErrCorrupt, file, tc.wantOff)
			}
		})
	}
}
