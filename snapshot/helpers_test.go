package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"path"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// equateEmpty compares keys and values with bytes.Equal: fast on large
// values, and a nil and an empty key or value are equal, as the format
// does not tell them apart.
var equateEmpty = cmp.Comparer(bytes.Equal)

// The helpers below build snapshot bytes from the format spec, by hand,
// without the package's encoder:
//
//	file   = "KVSNAP" uint16(version) frame...
//	frame  = uint32(crc32c(frame[4:9+len])) uint32(len) uint8(type) payload[len]
//	meta   = type 1: uint64 covered, uint64 revision, uint64 count
//	entry  = type 2: uint64 create, uint64 mod, uint64 version,
//	         uint32 keylen, key, uint32 vallen, value
//	end    = type 3: uint64 count, uint32 crc32c(file before the end frame)
//
// all little-endian.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	typeMeta  = 1
	typeEntry = 2
	typeEnd   = 3
)

func specHeader(version uint16) []byte {
	return binary.LittleEndian.AppendUint16([]byte("KVSNAP"), version)
}

func specFrame(b []byte, typ byte, payload []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, typ)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b[start:], crc32.Checksum(b[start+4:], castagnoli))
	return b
}

func specMeta(covered, rev, count uint64) []byte {
	p := binary.LittleEndian.AppendUint64(nil, covered)
	p = binary.LittleEndian.AppendUint64(p, rev)
	return binary.LittleEndian.AppendUint64(p, count)
}

func specEntry(e *record.Entry) []byte {
	p := binary.LittleEndian.AppendUint64(nil, uint64(e.CreateRev))
	p = binary.LittleEndian.AppendUint64(p, uint64(e.ModRev))
	p = binary.LittleEndian.AppendUint64(p, uint64(e.Version))
	p = binary.LittleEndian.AppendUint32(p, uint32(len(e.Key)))
	p = append(p, e.Key...)
	p = binary.LittleEndian.AppendUint32(p, uint32(len(e.Value)))
	return append(p, e.Value...)
}

// specEnd appends the end frame for a file b holding count entries.
func specEnd(b []byte, count uint64) []byte {
	p := binary.LittleEndian.AppendUint64(nil, count)
	p = binary.LittleEndian.AppendUint32(p, crc32.Checksum(b, castagnoli))
	return specFrame(b, typeEnd, p)
}

// specEncode builds a whole snapshot from the spec.
func specEncode(meta snapshot.Meta, entries []*record.Entry) []byte {
	b := specHeader(1)
	b = specFrame(b, typeMeta, specMeta(uint64(meta.Covered), uint64(meta.Revision), meta.Count))
	for _, e := range entries {
		b = specFrame(b, typeEntry, specEntry(e))
	}
	return specEnd(b, uint64(len(entries)))
}

// frameStarts returns the offset of every frame in a well-formed snapshot.
func frameStarts(b []byte) []int64 {
	var starts []int64
	for off := 8; off+9 <= len(b); off += 9 + int(binary.LittleEndian.Uint32(b[off+4:])) {
		starts = append(starts, int64(off))
	}
	return starts
}

// encode returns snapshot.Encode's bytes.
func encode(t testing.TB, meta snapshot.Meta, entries []*record.Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := snapshot.Encode(&buf, meta, slices.Values(entries)); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return buf.Bytes()
}

// encodeLeases returns snapshot.EncodeLeases's bytes.
func encodeLeases(t testing.TB, meta snapshot.Meta, leases []record.Lease, entries []*record.Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := snapshot.EncodeLeases(&buf, meta, leases, slices.Values(entries)); err != nil {
		t.Fatalf("EncodeLeases: %v", err)
	}
	return buf.Bytes()
}

// decoded is everything a decoder streamed back.
type decoded struct {
	Meta    snapshot.Meta
	Entries []*record.Entry
	Leases  []record.Lease
}

// decode runs snapshot.DecodeLeases and collects what it streams.
func decode(b []byte) (decoded, error) {
	var d decoded
	err := snapshot.DecodeLeases(b, func(m snapshot.Meta) error {
		d.Meta = m
		return nil
	}, func(le *record.Lease) error {
		if len(d.Entries) > 0 {
			return errors.New("a lease streamed after an entry")
		}
		d.Leases = append(d.Leases, *le)
		return nil
	}, func(e *record.Entry) error {
		c := *e // lent for the call
		c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
		d.Entries = append(d.Entries, &c)
		return nil
	})
	return d, err
}

// read runs snapshot.ReadLeases on dir and collects what it streams.
func read(fsys vfs.FS, dir string) (decoded, error) {
	var d decoded
	err := snapshot.ReadLeases(fsys, dir, func(m snapshot.Meta) error {
		d.Meta = m
		return nil
	}, func(le *record.Lease) error {
		d.Leases = append(d.Leases, *le)
		return nil
	}, func(e *record.Entry) error {
		c := *e // lent for the call
		c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
		d.Entries = append(d.Entries, &c)
		return nil
	})
	return d, err
}

// memWith returns a MemFS holding b as d/snapshot.
func memWith(t testing.TB, b []byte) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	putFile(t, m, path.Join("d", snapshot.Name), b)
	return m
}

// putFile replaces name with b.
func putFile(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 {
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkCorrupt fails the test unless err matches want (snapshot.ErrCorrupt
// or snapshot.ErrVersion) as a *corrupt.Error naming file at offset.
func checkCorrupt(t testing.TB, err, want error, file string, offset int64) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want one matching %v", err, want)
	}
	var ce *corrupt.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *corrupt.Error", err, err)
	}
	if ce.File != file || ce.Offset != offset {
		t.Fatalf("error %v at %s:%d, want %s:%d", err, ce.File, ce.Offset, file, offset)
	}
	// Damage is corruption; a version this build does not read is not.
	if got, want := corrupt.Is(err), want == snapshot.ErrCorrupt; got != want {
		t.Fatalf("corrupt.Is(%v) = %v, want %v", err, got, want)
	}
}

// entry is a short way to write an entry.
func entry(key, value string, create, mod record.Revision, version int64) *record.Entry {
	return &record.Entry{Key: []byte(key), Value: []byte(value), CreateRev: create, ModRev: mod, Version: version}
}
