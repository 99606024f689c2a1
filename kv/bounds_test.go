package kv_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// TestTooLarge: keys and values over the configured maxima are refused with
// ErrTooLarge by every kind of write, and commit nothing; at the limits
// they commit.
func TestTooLarge(t *testing.T) {
	s, _ := memStore(t, &kv.Options{MaxKeySize: 8, MaxValueSize: 16})
	key9, val17 := bytes.Repeat([]byte("k"), 9), bytes.Repeat([]byte("v"), 17)
	writes := map[string]func() error{
		"Put key":     func() error { _, err := s.Put(key9, nil); return err },
		"Put value":   func() error { _, err := s.Put([]byte("k"), val17); return err },
		"Add key":     func() error { _, _, err := s.Add(key9, 1); return err },
		"Delete key":  func() error { _, err := s.Delete(key9); return err },
		"Submit":      func() error { _, _, err := s.Submit(kv.PutOp([]byte("k"), val17)).Wait(); return err },
		"Txn then":    func() error { _, err := s.Txn(kv.Txn{Then: []kv.Op{kv.PutOp([]byte("k"), val17)}}); return err },
		"Txn else":    func() error { _, err := s.Txn(kv.Txn{Else: []kv.Op{kv.DeleteOp(key9)}}); return err },
		"Txn compare": func() error { _, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Exists(key9)}}); return err },
		"Fenced put":  func() error { _, err := s.Fenced(kv.Fence{Key: key9, Token: 1}).Put([]byte("k"), nil); return err },
		"Fenced value": func() error {
			_, err := s.Fenced(kv.Fence{Key: []byte("f"), Token: 1}).Put([]byte("k"), val17)
			return err
		},
		"value at 17":    func() error { _, err := s.Put([]byte("12345678"), val17); return err },
		"key at 9 (Add)": func() error { _, _, err := s.Add(bytes.Repeat([]byte("a"), 9), 0); return err },
	}
	for name, w := range writes {
		if err := w(); !errors.Is(err, kv.ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	if s.Revision() != 0 {
		t.Errorf("revision %d after refused writes, want 0", s.Revision())
	}
	if _, err := s.Put(bytes.Repeat([]byte("k"), 8), bytes.Repeat([]byte("v"), 16)); err != nil {
		t.Errorf("a key and a value at the limits: %v", err)
	}
}

// TestSnapshotCountClaim: a directory whose snapshot claims 2^40 entries
// (meta record patched, its checksum fixed) is refused by Open as corrupt,
// and the open allocates by the size of the files, not by the count.
func TestSnapshotCountClaim(t *testing.T) {
	s, mem := memStore(t, &kv.Options{})
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := vfs.ReadFile(mem, "/data/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	// The meta frame: header at 8, CRC over bytes 12..9+24 of it; the count
	// is its payload's third uint64.
	// The end frame (the last 9+12 bytes) holds the CRC of the file before
	// it: fix that and its own CRC too, so that only the count is wrong.
	const meta = 8
	crc32c := func(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
	binary.LittleEndian.PutUint64(b[meta+9+16:], 1<<40)
	binary.LittleEndian.PutUint32(b[meta:], crc32c(b[meta+4:meta+9+24]))
	end := len(b) - 21
	binary.LittleEndian.PutUint32(b[end+9+8:], crc32c(b[:end]))
	binary.LittleEndian.PutUint32(b[end:], crc32c(b[end+4:]))
	fsys := memDirWith(t, map[string][]byte{"snapshot": b, "log.000002": readMem(t, mem, "/data/log.000002")})

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err = kv.Open("/data", &kv.Options{FS: fsys})
	runtime.ReadMemStats(&ms)
	if !recovery.IsCorrupt(err) {
		t.Fatalf("Open: %v, want a corruption error", err)
	}
	if n := ms.TotalAlloc - before; n > 4<<20 {
		t.Errorf("the refused Open allocated %d bytes", n)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("meta says 1099511627776")) {
		t.Errorf("refused for another reason: %v", err)
	}
}

func readMem(tb testing.TB, fsys vfs.FS, name string) []byte {
	tb.Helper()
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
