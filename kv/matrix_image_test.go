package kv_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// snapshotUnits returns the starts of the units of a snapshot that an
// error may name, and where its content ends: the frames of versions 1
// and 2, or the parts of an image.
func snapshotUnits(b []byte) ([]int64, int64) {
	if len(b) >= 8 && binary.LittleEndian.Uint16(b[6:]) == image.Version {
		return imageUnits(b), int64(len(b))
	}
	return snapshotStarts(b)
}

// imageUnits returns the starts of the parts of image b that its reader
// names in an error (FORMAT.md, "Snapshot image"): the header, the meta
// frame, the zeros after it, each block, the lease section and block
// index (one checksum), the zeros after them, each hash page and the
// footer. It reads the layout from the footer of b, undamaged.
func imageUnits(b []byte) []int64 {
	size := int64(len(b))
	fo := size - image.FooterSize
	f := b[fo:]
	u64 := func(off int64) int64 { return int64(binary.LittleEndian.Uint64(f[off:])) }
	nblocks, dpages, leaseLen, idxLen, hpages := u64(8), u64(16), u64(32), u64(40), u64(48)
	out := []int64{0, 8, 8 + 25}
	secOff := image.PageSize * (1 + dpages)
	for i := range nblocks {
		it := secOff + leaseLen + 16*i
		out = append(out, image.PageSize*int64(binary.LittleEndian.Uint64(b[it:])))
	}
	secEnd := secOff + leaseLen + idxLen
	hashOff := (secEnd + image.PageSize - 1) / image.PageSize * image.PageSize
	out = append(out, secOff, secEnd)
	for p := range hpages {
		out = append(out, hashOff+p*image.PageSize)
	}
	return append(out, fo)
}

// imageRules adjusts the cases on the snapshot when b, its bytes, is an
// image: an image names the part that holds the damage, and the checks
// of Open come in an order of their own (the footer before the blocks),
// so a refusal must name a part from the first damaged one to the last;
// a cut or appended bytes show first at the footer, at the end of the
// file as it now is.
func imageRules(cs []matrixDamage, b []byte) []matrixDamage {
	if len(b) < 8 || binary.LittleEndian.Uint16(b[6:]) != image.Version {
		return cs
	}
	starts, end := snapshotUnits(b)
	for i := range cs {
		c := &cs[i]
		if c.file != snapshot.Name {
			continue
		}
		switch c.kind {
		case "truncate", "garbage":
			c.errFrom = 0
			if c.kind == "garbage" {
				c.first = int64(len(b)) + 100
			}
		case "zero-sector":
			var s int64
			if _, err := fmt.Sscanf(c.name, "zero "+snapshot.Name+" sector %d", &s); err != nil {
				c.errFrom = -2 // not a name cases gives: any offset
				continue
			}
			last := min(512*(s+1), int64(len(b))) - 1
			c.first = unitEnd(starts, end, last) - 1
		case "flip":
			c.first = unitEnd(starts, end, c.first) - 1
		}
	}
	return cs
}

// unitEnd returns the end of the unit that holds off.
func unitEnd(starts []int64, end, off int64) int64 {
	for _, s := range starts {
		if s > off {
			return s
		}
	}
	return end
}

// readSnapshot reads the snapshot of /data (any version): its first
// record, leases and entries (copies).
func readSnapshot(tb testing.TB, fsys vfs.FS) (snapshot.Meta, []record.Lease, []record.Entry) {
	tb.Helper()
	var meta snapshot.Meta
	var leases []record.Lease
	var entries []record.Entry
	err := image.ReadAny(fsys, "/data/"+snapshot.Name, func(m snapshot.Meta) error { meta = m; return nil },
		func(le *record.Lease) error { leases = append(leases, *le); return nil },
		func(e *record.Entry) error {
			c := *e
			c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
			entries = append(entries, c)
			return nil
		})
	if err != nil {
		tb.Fatal(err)
	}
	return meta, leases, entries
}

// toImage rewrites the snapshot of /data as an image with the same first
// record, leases and entries, as image.Write publishes one.
func toImage(tb testing.TB, fsys vfs.FS) {
	tb.Helper()
	meta, leases, entries := readSnapshot(tb, fsys)
	if err := image.Write(fsys, "/data", snapshot.Name, meta, leases, slices.Values(ptrs(entries)), image.Options{Seed: 3}); err != nil {
		tb.Fatal(err)
	}
}

func ptrs(es []record.Entry) []*record.Entry {
	out := make([]*record.Entry, len(es))
	for i := range es {
		out[i] = &es[i]
	}
	return out
}

// TestCorruptionMatrixImage runs the matrix's cases on the snapshot of
// the many-segments layout written as an image (version 4): every flip,
// cut, appended garbage, zeroed sector, deletion and stale snapshot.tmp
// of it. The rules are the matrix's, but for where a refusal may point:
// an image names the part that holds the damage (a block, a hash page,
// its lease section and block index, its footer), and the checks of Open
// come in an order of their own (the footer before the blocks), so a
// refusal must name a part from the first damaged one to the last; a cut
// or appended bytes show first at the footer, at the end of the file as
// it now is. Shown to fail when the image's reader skips a block's
// checksum (recovery loads a flipped value).
func TestCorruptionMatrixImage(t *testing.T) {
	d := prepareMatrix(t, manySegments)
	toImage(t, d.fs)
	b, err := vfs.ReadFile(d.fs, "/data/"+snapshot.Name)
	if err != nil {
		t.Fatal(err)
	}
	d.files[snapshot.Name] = b
	var cases []matrixDamage
	for _, c := range d.cases(1) {
		if c.file == snapshot.Name || c.file == snapshot.TmpName {
			cases = append(cases, c)
		}
	}
	starts, _ := snapshotUnits(b)
	res := runMatrix(t, d, cases, variant.None, 20)
	t.Logf("image of %d bytes, units %v\n%s", len(b), starts, res)
	for _, p := range res.problems {
		t.Error(p)
	}
	if res.cases < 300 {
		t.Errorf("only %d cases", res.cases)
	}
	if !strings.Contains(res.String(), string(refused)) {
		t.Error("no case refused")
	}
}

// readMeta returns the first record of the snapshot in dir, of any
// version, with its entry and lease counts.
func readMeta(fsys vfs.FS, dir string) (snapshot.Meta, error) {
	var m snapshot.Meta
	err := image.ReadAny(fsys, dir+"/"+snapshot.Name, func(x snapshot.Meta) error { m = x; return nil }, nil, nil)
	return m, err
}

// toFrames rewrites the snapshot of /data (any version) in frames,
// version 2 (1 without leases), as snapshot.WriteLeases publishes it.
func toFrames(tb testing.TB, fsys vfs.FS) {
	tb.Helper()
	meta, leases, entries := readSnapshot(tb, fsys)
	if err := snapshot.WriteLeases(fsys, "/data", meta, leases, slices.Values(ptrs(entries))); err != nil {
		tb.Fatal(err)
	}
}

// isImage reports whether b is a snapshot image (version 4).
func isImage(b []byte) bool { return len(b) >= 8 && binary.LittleEndian.Uint16(b[6:]) == image.Version }

// TestCorruptionMatrixImageLazy is TestCorruptionMatrixImage on an image
// that also holds 300 keys the log never touches, in blocks of their own:
// the open replays the log over the image without reading those blocks,
// so damage in one of them must show in the reads that need it (Get and
// ScanErr, each checked against the model, failing with snapshot
// corruption naming the block) or, for a part no read needs, in Check;
// never as a wrong value. Shown to fail when Get skips a block's checksum
// (try returning blk before the blockOK test in image.Reader.block): the
// reads serve flipped values.
func TestCorruptionMatrixImageLazy(t *testing.T) {
	d := prepareMatrix(t, manySegments)
	meta, _, entries := readSnapshot(t, d.fs)
	for i := range 300 {
		k, v := fmt.Sprintf("zfill%03d", i), fmt.Sprintf("filler value %03d", i)
		entries = append(entries, record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: 1, ModRev: 1, Version: 1})
		for r := d.snapRev; r < len(d.models); r++ {
			d.models[r][k] = v
		}
	}
	slices.SortFunc(entries, func(a, b record.Entry) int { return bytes.Compare(a.Key, b.Key) })
	if err := image.Write(d.fs, "/data", snapshot.Name, meta, nil, slices.Values(ptrs(entries)), image.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	b, err := vfs.ReadFile(d.fs, "/data/"+snapshot.Name)
	if err != nil {
		t.Fatal(err)
	}
	d.files[snapshot.Name] = b
	var cases []matrixDamage
	for _, c := range d.cases(1) {
		if c.file == snapshot.Name {
			cases = append(cases, c)
		}
	}
	res := runMatrix(t, d, cases, variant.None, 20)
	t.Logf("image of %d bytes\n%s", len(b), res)
	for _, p := range res.problems {
		t.Error(p)
	}
	for _, o := range []matrixOutcome{refused, failedRead} {
		if !strings.Contains(res.String(), string(o)) {
			t.Errorf("no case %q", o)
		}
	}
}
