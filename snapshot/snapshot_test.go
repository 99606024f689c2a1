package snapshot_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// variedEntries are entries in key order with the shapes that matter: an
// empty key, keys with zero bytes, empty and large values.
func variedEntries() []*record.Entry {
	return []*record.Entry{
		entry("", "value of the empty key", 1, 1, 1),
		entry("\x00", "", 2, 9, 4),
		entry("\x00\x00", "\x00", 3, 3, 1),
		entry("a\x00b", "zero\x00inside", 4, 50, 12),
		entry("key", strings.Repeat("v", 1<<20), 5, 100, 2),  // more than the read buffer
		entry("key2", strings.Repeat("w", 256<<10), 6, 6, 1), // exactly the read buffer
		entry("\xff\xff", "last", 100, 100, 1<<40),
	}
}

// newMap loads entries into a record.Map at rev.
func newMap(entries []*record.Entry, rev record.Revision) *record.Map {
	m := record.NewMap()
	for _, e := range entries {
		m.Load(e)
	}
	m.SetRevision(rev)
	return m
}

func TestRoundtrip(t *testing.T) {
	many := make([]*record.Entry, 1000)
	for i := range many {
		k := []byte{byte(i >> 8), byte(i)}
		many[i] = &record.Entry{Key: k, Value: bytes.Repeat(k, i%7), CreateRev: record.Revision(i + 1), ModRev: 2000, Version: int64(i%5 + 1)}
	}
	tests := []struct {
		name    string
		covered uint64
		rev     record.Revision
		entries []*record.Entry
	}{
		{name: "varied", covered: 7, rev: 100, entries: variedEntries()},
		{name: "zero entries", covered: 1, rev: 0},
		{name: "zero entries at a revision", covered: 12, rev: 99},
		{name: "only the empty key", covered: 1, rev: 5, entries: []*record.Entry{entry("", "", 5, 5, 1)}},
		{name: "many", covered: 1 << 40, rev: 2000, entries: many},
	}
	fileSystems := []struct {
		name string
		new  func(t testing.TB) (vfs.FS, string)
	}{
		{"Mem", func(t testing.TB) (vfs.FS, string) {
			m := vfs.NewMem()
			if err := m.MkdirAll("d", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "d"
		}},
		{"OS", func(t testing.TB) (vfs.FS, string) { return vfs.OS, t.TempDir() }},
	}
	for _, fsc := range fileSystems {
		for _, tc := range tests {
			t.Run(fsc.name+"/"+tc.name, func(t *testing.T) {
				fsys, dir := fsc.new(t)
				m := newMap(tc.entries, tc.rev)
				meta := snapshot.Meta{Covered: wal.SegmentNum(tc.covered), Revision: m.Revision(), Count: uint64(m.Len())}
				if err := snapshot.Write(fsys, dir, meta, m.All(nil, nil)); err != nil {
					t.Fatalf("Write: %v", err)
				}
				names, err := fsys.List(dir)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{snapshot.Name}, names); diff != "" {
					t.Errorf("files after Write (-want +got):\n%s", diff)
				}
				want := decoded{Meta: meta, Entries: tc.entries}
				got, err := read(fsys, dir)
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
					t.Errorf("Read (-want +got):\n%s", diff)
				}
				gotMeta, err := snapshot.ReadMeta(fsys, dir)
				if err != nil {
					t.Fatalf("ReadMeta: %v", err)
				}
				if diff := cmp.Diff(meta, gotMeta); diff != "" {
					t.Errorf("ReadMeta (-want +got):\n%s", diff)
				}
				// The file holds exactly the bytes of the spec.
				b, err := vfs.ReadFile(fsys, path.Join(dir, snapshot.Name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(specEncode(meta, tc.entries), b) {
					t.Errorf("file differs from the bytes the spec gives")
				}
				// A loaded map gives the same entries back.
				loaded := record.NewMap()
				for _, e := range got.Entries {
					loaded.Load(e)
				}
				if diff := cmp.Diff(entries(m), entries(loaded), equateEmpty); diff != "" {
					t.Errorf("reloaded map (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestWriteIsDurable(t *testing.T) {
	entries := variedEntries()[:4]
	meta := snapshot.Meta{Covered: 3, Revision: 50, Count: uint64(len(entries))}
	tests := []struct {
		name    string
		bug     variant.Bug
		old     bool // a durable snapshot exists before
		wantErr error
		want    decoded // after a power loss right after Write
	}{
		{name: "first", want: decoded{Meta: meta, Entries: entries}},
		{name: "replace", old: true, want: decoded{Meta: meta, Entries: entries}},
		{name: "bug: skip directory sync, first", bug: variant.NoDirSync, wantErr: fs.ErrNotExist},
		{name: "bug: skip directory sync, replace", bug: variant.NoDirSync, old: true, want: decoded{Meta: snapshot.Meta{Covered: 1, Revision: 1, Count: 1}, Entries: []*record.Entry{entry("old", "", 1, 1, 1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			if err := m.MkdirAll("d", 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.old {
				old := []*record.Entry{entry("old", "", 1, 1, 1)}
				if err := snapshot.Write(m, "d", snapshot.Meta{Covered: 1, Revision: 1, Count: 1}, slices.Values(old)); err != nil {
					t.Fatal(err)
				}
			}
			if err := snapshot.Write(variant.Wrap(m, tc.bug), "d", meta, slices.Values(entries)); err != nil {
				t.Fatal(err)
			}
			got, err := read(m.CrashClone(), "d")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Read after a crash = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got, equateEmpty); diff != "" {
				t.Errorf("Read after a crash (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeCountMismatch(t *testing.T) {
	entries := variedEntries()[:3]
	for _, count := range []uint64{0, 2, 4, 1 << 63} {
		meta := snapshot.Meta{Covered: 1, Revision: 100, Count: count}
		if err := snapshot.Encode(io.Discard, meta, slices.Values(entries)); err == nil {
			t.Errorf("Encode of %d entries with meta.Count %d succeeded", len(entries), count)
		}
	}
	if err := snapshot.Encode(io.Discard, snapshot.Meta{Count: 1}, slices.Values([]*record.Entry(nil))); err == nil {
		t.Errorf("Encode of no entries with meta.Count 1 succeeded")
	}
}

// TestWriteCountMismatch checks that a failed Write publishes nothing and
// leaves the previous snapshot as it was.
func TestWriteCountMismatch(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	old := []*record.Entry{entry("old", "v", 1, 1, 1)}
	oldMeta := snapshot.Meta{Covered: 1, Revision: 1, Count: 1}
	if err := snapshot.Write(m, "d", oldMeta, slices.Values(old)); err != nil {
		t.Fatal(err)
	}
	entries := variedEntries()
	if err := snapshot.Write(m, "d", snapshot.Meta{Covered: 2, Revision: 100, Count: 3}, slices.Values(entries)); err == nil {
		t.Fatal("Write with a wrong meta.Count succeeded")
	}
	names, err := m.List("d")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{snapshot.Name}, names); diff != "" {
		t.Errorf("files after a failed Write (-want +got):\n%s", diff)
	}
	got, err := read(m, "d")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(decoded{Meta: oldMeta, Entries: old}, got); diff != "" {
		t.Errorf("snapshot after a failed Write (-want +got):\n%s", diff)
	}
}

// TestEncodeMatchesSpec compares Encode with bytes built by hand from the
// format spec.
func TestEncodeMatchesSpec(t *testing.T) {
	tests := []struct {
		name    string
		meta    snapshot.Meta
		entries []*record.Entry
	}{
		{"zero entries", snapshot.Meta{Covered: 0, Revision: 0}, nil},
		{"one entry", snapshot.Meta{Covered: 9, Revision: 10, Count: 1}, []*record.Entry{entry("k", "v", 10, 10, 1)}},
		{"varied", snapshot.Meta{Covered: 1<<64 - 1, Revision: 100, Count: 7}, variedEntries()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := specEncode(tc.meta, tc.entries)
			got := encode(t, tc.meta, tc.entries)
			if !bytes.Equal(want, got) {
				t.Errorf("Encode differs from the spec:\nwant % x\ngot  % x", head(want), head(got))
			}
		})
	}
}

func head(b []byte) []byte {
	if len(b) > 128 {
		return b[:128]
	}
	return b
}

func TestReadMeta(t *testing.T) {
	entries := variedEntries()[:3]
	meta := snapshot.Meta{Covered: 5, Revision: 50, Count: 3}
	good := encode(t, meta, entries)
	starts := frameStarts(good)
	damagedEntry := slices.Clone(good)
	damagedEntry[starts[2]+20] ^= 1
	damagedMeta := slices.Clone(good)
	damagedMeta[starts[0]+12] ^= 1
	name := path.Join("d", snapshot.Name)
	tests := []struct {
		name    string
		file    []byte // nil: no snapshot
		want    snapshot.Meta
		wantErr error
		wantOff int64
	}{
		{name: "good", file: good, want: meta},
		{name: "missing", wantErr: fs.ErrNotExist},
		// ReadMeta checks only the first record; Read checks the rest.
		{name: "damaged entry", file: damagedEntry, want: meta},
		{name: "damaged meta", file: damagedMeta, wantErr: snapshot.ErrCorrupt, wantOff: 8},
		{name: "meta cut short", file: good[:starts[1]-1], wantErr: snapshot.ErrCorrupt, wantOff: 8},
		{name: "bad version", file: append(specHeader(3), good[8:]...), wantErr: snapshot.ErrVersion, wantOff: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			if err := m.MkdirAll("d", 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.file != nil {
				putFile(t, m, name, tc.file)
			}
			got, err := snapshot.ReadMeta(m, "d")
			switch {
			case tc.wantErr == fs.ErrNotExist:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("ReadMeta = %v, want fs.ErrNotExist", err)
				}
			case tc.wantErr != nil:
				checkCorrupt(t, err, tc.wantErr, name, tc.wantOff)
			case err != nil:
				t.Fatalf("ReadMeta: %v", err)
			default:
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("ReadMeta (-want +got):\n%s", diff)
				}
			}
		})
	}
	// And Read does see the damaged entry.
	_, err := read(memWith(t, damagedEntry), "d")
	checkCorrupt(t, err, snapshot.ErrCorrupt, name, starts[2])
}

func TestReadMissing(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := read(m, "d"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing snapshot = %v, want fs.ErrNotExist", err)
	}
}

// TestReadCallbackErrors checks that an error from a callback stops Read
// and is returned as it is.
func TestReadCallbackErrors(t *testing.T) {
	errStop := errors.New("test: stop")
	b := encode(t, snapshot.Meta{Covered: 1, Revision: 100, Count: 7}, variedEntries())
	m := memWith(t, b)
	var calls int
	err := snapshot.Read(m, "d", func(snapshot.Meta) error { return errStop }, func(*record.Entry) error {
		calls++
		return nil
	})
	if !errors.Is(err, errStop) || calls != 0 {
		t.Errorf("meta callback error: Read = %v after %d entries, want %v after 0", err, calls, errStop)
	}
	calls = 0
	err = snapshot.Read(m, "d", nil, func(*record.Entry) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 2 {
		t.Errorf("entry callback error: Read = %v after %d entries, want %v after 2", err, calls, errStop)
	}
	if err := snapshot.Read(m, "d", nil, nil); err != nil {
		t.Errorf("Read with nil callbacks: %v", err)
	}
}

// entries returns copies of m's entries, in key order.
func entries(m *record.Map) []record.Entry {
	var es []record.Entry
	for e := range m.All(nil, nil) {
		es = append(es, *e)
	}
	return es
}
