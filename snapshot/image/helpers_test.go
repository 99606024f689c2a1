package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"testing"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// content is what an image holds, for the tests to write and compare.
type content struct {
	meta    snapshot.Meta
	entries []record.Entry // ascending keys
	leases  []record.Lease
}

func (c *content) seq() iter.Seq[*record.Entry] {
	return func(yield func(*record.Entry) bool) {
		for i := range c.entries {
			if !yield(&c.entries[i]) {
				return
			}
		}
	}
}

// encode returns c's image, with a fixed seed.
func (c *content) encode(t testing.TB) []byte {
	t.Helper()
	return c.encodeVersion(t, Version)
}

// encodeVersion returns c's image of format version v (Version or
// VersionBlockNumbered), with a fixed seed.
func (c *content) encodeVersion(t testing.TB, v uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, c.meta, c.leases, c.seq(), Options{Seed: 0x5eed, version: v}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makeContent returns n entries with keys k000000… and values of
// valueLen(i) bytes; every seventh key is bound to one of two leases
// when leases is set.
func makeContent(n int, valueLen func(i int) int, leases bool) *content {
	c := &content{meta: snapshot.Meta{Covered: 7, Revision: record.Revision(n + 10)}}
	for i := range n {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueLen(i))
		c.entries = append(c.entries, record.Entry{
			Key:       fmt.Appendf(nil, "k%06d", i*3),
			Value:     v,
			CreateRev: record.Revision(i%5 + 1),
			ModRev:    record.Revision(i + 6),
			Version:   int64(i%3 + 1),
		})
	}
	if leases && n > 0 {
		c.leases = []record.Lease{{ID: 2, TTL: 5e9, Deadline: 1e18}, {ID: 4, TTL: 7e9, Deadline: 2e18}}
		for i := 0; i < n; i += 7 {
			l := &c.leases[(i/7)%2]
			l.Keys = append(l.Keys, c.entries[i].Key)
		}
	}
	return c
}

// memFile puts b in a new in-memory file system and returns it and the
// file's name.
func memFile(t testing.TB, b []byte) (vfs.FS, string) {
	t.Helper()
	fs := vfs.NewMem()
	must(t, fs.MkdirAll("d", 0o755))
	f, err := fs.Create("d/snapshot")
	must(t, err)
	_, err = f.WriteAt(b, 0)
	must(t, err)
	must(t, f.Close())
	return fs, "d/snapshot"
}

// osFile writes b to a file in a temporary directory.
func osFile(t testing.TB, b []byte) string {
	t.Helper()
	name := path.Join(t.TempDir(), "snapshot")
	f, err := vfs.OS.Create(name)
	must(t, err)
	_, err = f.WriteAt(b, 0)
	must(t, err)
	must(t, f.Close())
	return name
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// isCorrupt reports whether err is the image's corruption: ErrCorrupt in
// a *corrupt.Error naming file.
func isCorrupt(err error, file string) bool {
	var ce *corrupt.Error
	return errors.Is(err, snapshot.ErrCorrupt) && errors.As(err, &ce) && ce.File == file && ce.Offset >= 0
}

// collect returns every entry All yields (copied), and its error.
func collect(r *Reader, start, end []byte) ([]record.Entry, error) {
	return collectWalk(r.All(start, end))
}

// collectWalk is collect of any walk of a Reader's (All, AllOnce).
func collectWalk(walk iter.Seq2[*record.Entry, error]) ([]record.Entry, error) {
	var out []record.Entry
	for e, err := range walk {
		if err != nil {
			return out, err
		}
		out = append(out, record.Entry{Key: slices.Clone(e.Key), Value: slices.Clone(e.Value),
			CreateRev: e.CreateRev, ModRev: e.ModRev, Version: e.Version})
	}
	return out, nil
}

// resealSection makes the checksums of the lease section and block index
// at secOff .. secEnd of img, an image of version v, hold again: version
// 5's page checksum table after it and the footer's checksum of the
// table, or the footer's checksum of the section; then the footer's own.
func resealSection(img []byte, v uint16, secOff, secEnd uint64) {
	le := binary.LittleEndian
	fo := img[len(img)-FooterSize:]
	sum := crc(img[secOff:secEnd])
	if v == Version {
		tab := img[secEnd : secEnd+4*sectionPages(secEnd-secOff)]
		for p := range sectionPages(secEnd - secOff) {
			from := secOff + p*PageSize
			le.PutUint32(tab[4*p:], crc(img[from:min(from+PageSize, secEnd)]))
		}
		sum = crc(tab)
	}
	le.PutUint32(fo[64:], sum)
	le.PutUint32(fo[68:], crc(fo[:68]))
}
