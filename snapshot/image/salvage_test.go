package image

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// salvaged returns what Salvage hands out of file name (copied) and its
// report.
func salvaged(t testing.TB, fsys vfs.FS, name string) ([]record.Entry, snapshot.Salvaged) {
	t.Helper()
	var out []record.Entry
	sv, err := Salvage(fsys, name, func(e *record.Entry) error {
		c := *e
		c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, sv
}

// TestSalvageWhole: an image salvages whole, complete, with its meta,
// count and leases.
func TestSalvageWhole(t *testing.T) {
	c := makeContent(300, func(i int) int { return 40 + i%50 }, true)
	fsys, name := memFile(t, c.encode(t))
	got, sv := salvaged(t, fsys, name)
	if d := cmp.Diff(c.entries, got); d != "" {
		t.Fatalf("entries (-want +got):\n%s", d)
	}
	if !sv.Complete || !sv.MetaOK || sv.LeasesUnknown || len(sv.Lost) != 0 || len(sv.Index) != 0 ||
		sv.Meta.Covered != c.meta.Covered || sv.Meta.Revision != c.meta.Revision ||
		sv.Meta.Count != 300 || sv.Meta.Leases != 2 || sv.Leases != 2 || sv.Entries != 300 {
		t.Fatalf("report %+v", sv)
	}
	if _, err := SalvageAny(fsys, "d/missing", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestSalvageEveryByte flips each byte of a small image in turn (one
// byte in three, all of them in the first block): Salvage never hands out
// an entry the image did not hold, in key order, never calls the result
// complete, and each entry it does not return lies in a Lost range (its
// key strictly between After and Before). Shown to fail when Salvage
// skips the block checksum (wrong values are handed out).
func TestSalvageEveryByte(t *testing.T) {
	c := makeContent(60, func(i int) int {
		if i == 30 {
			return 5000 // a block of two pages
		}
		return 50 + i%31
	}, true)
	img := c.encode(t)
	if testing.Short() {
		t.Skip("a flip of every third byte")
	}
	held := map[string]record.Entry{}
	for _, e := range c.entries {
		held[string(e.Key)] = e
	}
	fsys, name := memFile(t, img)
	f, err := fsys.OpenReadWrite(name)
	must(t, err)
	defer f.Close()
	for off := range img {
		if off%3 != 0 && (off < PageSize || off >= 2*PageSize) {
			continue
		}
		_, err := f.WriteAt([]byte{img[off] ^ 0x5a}, int64(off))
		must(t, err)
		got, sv := salvaged(t, fsys, name)
		if sv.Complete {
			t.Fatalf("flip at %d: salvage calls the image complete", off)
		}
		seen := map[string]bool{}
		for i, e := range got {
			if w, ok := held[string(e.Key)]; !ok || !sameEntry(&w, &e) {
				t.Fatalf("flip at %d: entry %q=%q not in the image", off, e.Key, e.Value)
			}
			if i > 0 && bytes.Compare(got[i-1].Key, e.Key) >= 0 {
				t.Fatalf("flip at %d: %q after %q", off, e.Key, got[i-1].Key)
			}
			seen[string(e.Key)] = true
		}
		if off >= 8 { // a flip of the header makes it no image at all
			for _, e := range c.entries {
				if !seen[string(e.Key)] && !inLost(e.Key, sv.Lost) {
					t.Fatalf("flip at %d: %q not returned and in no lost range %+v", off, e.Key, sv.Lost)
				}
			}
		}
		_, err = f.WriteAt(img[off:off+1], int64(off))
		must(t, err)
	}
}

func sameEntry(a, b *record.Entry) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) &&
		a.CreateRev == b.CreateRev && a.ModRev == b.ModRev && a.Version == b.Version
}

func inLost(key []byte, lost []snapshot.Lost) bool {
	for _, l := range lost {
		if (l.After == nil || bytes.Compare(l.After, key) < 0) && (l.Before == nil || bytes.Compare(key, l.Before) < 0) {
			return true
		}
	}
	return false
}

// FuzzSalvage salvages arbitrary bytes as an image: no panic, no error
// (a file in memory always reads), entries in key order, and a result
// called complete only for an image ReadAny accepts.
func FuzzSalvage(f *testing.F) {
	for _, c := range []*content{
		makeContent(0, nil, false),
		makeContent(3, func(int) int { return 2 }, true),
		makeContent(150, func(i int) int { return i % 7 }, true),
		makeContent(3, func(i int) int { return 4100 * (i % 2) }, false),
	} {
		f.Add(c.encode(f))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys, name := memFile(t, b)
		got, sv := salvaged(t, fsys, name)
		for i := 1; i < len(got); i++ {
			if bytes.Compare(got[i-1].Key, got[i].Key) >= 0 {
				t.Fatalf("%q after %q", got[i].Key, got[i-1].Key)
			}
		}
		if sv.Complete && ReadAny(fsys, name, nil, nil, nil) != nil {
			t.Fatal("complete, and ReadAny refuses it")
		}
	})
}
