package wal

import (
	"testing"

	"github.com/kvstore/kv/vfs"
)

// TestKeyForCache derives keys of salts in turn, each again right after
// itself (what the cache serves) and after another salt (what it must
// not), and checks each against a key made afresh.
func TestKeyForCache(t *testing.T) {
	for _, salt := range []uint64{1, 1, 2, 1, 0x9e3779b97f4a7c15, 2, 2} {
		got, want := keyFor(salt), makeKey(salt)
		if got.salt != salt || got.crc0 != want.crc0 || *got.bytes() != *want.bytes() {
			t.Fatalf("keyFor(%#x) is not the key of that salt", salt)
		}
	}
}

// TestKeyDerivedAtFirstScramble checks that the scrambling key is derived
// when a payload needs it and not before: a scan of a segment holding
// marks only (the one a checkpoint starts, which every reopen reads)
// leaves it underived; a scan of one with a data record derives it, and
// the record reads back.
func TestKeyDerivedAtFirstScramble(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Create(fsys, "d", 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Mark(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	scan := func(seg SegmentNum) []string {
		lastKey.Store(nil) // the writer's key is not the scan's
		var got []string
		rd := &Reader{FS: fsys, Dir: "d"}
		if _, err := rd.Scan(seg, true, func(r Record) error {
			got = append(got, string(r.Payload))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scan(1); len(got) != 0 {
		t.Fatalf("records %q in a segment of marks", got)
	}
	if k := lastKey.Load(); k == nil || k.key != nil {
		t.Fatalf("after a scan of marks only: key %v, want one made and its bytes not derived", k)
	}
	w, err = Create(fsys, "d", 2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append([]byte("payload")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := scan(2); len(got) != 1 || got[0] != "payload" {
		t.Fatalf("records %q, want [payload]", got)
	}
	if k := lastKey.Load(); k == nil || k.key == nil {
		t.Fatal("after a scan of a data record: key bytes not derived")
	}
}
