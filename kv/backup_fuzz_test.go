package kv_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/fakeclock"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// backupTestdata are the files in testdata/backup/: a golden backup, the
// backup of an empty store, and damaged copies that seed
// FuzzDecodeBackup, with what decoding each must give.
var backupTestdata = []struct {
	name    string
	make    func(t testing.TB) []byte
	wantErr error // nil: decodes
	wantOff func(b []byte) int64
}{
	{name: "backup.golden", make: goldenBackup},
	{name: "empty.golden", make: func(t testing.TB) []byte {
		s, err := kv.Open("/d", &kv.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var buf bytes.Buffer
		if _, err := s.Backup(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}},
	{name: "leases.golden", make: func(t testing.TB) []byte {
		// Two leases, one with two keys, and a plain key: format version 2.
		s, err := kv.Open("/d", &kv.Options{FS: vfs.NewMem(), Clock: fakeclock.New(t0)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		a, _ := s.Grant(10 * time.Second)
		b, _ := s.Grant(time.Minute)
		s.PutLease([]byte("a"), []byte("1"), a)
		s.PutLease([]byte("b"), []byte("2"), a)
		s.PutLease([]byte("c"), []byte("3"), b)
		s.Put([]byte("plain"), []byte("4"))
		var buf bytes.Buffer
		if _, err := s.Backup(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}},
	{name: "bitflip.bin", make: func(t testing.TB) []byte {
		b := goldenBackup(t)
		b[backupFrames(b)[2]+30] ^= 0x04 // a byte of the second entry
		return b
	}, wantErr: kv.ErrBackupCorrupt, wantOff: func(b []byte) int64 { return backupFrames(b)[2] }},
	{name: "truncated.bin", make: func(t testing.TB) []byte {
		b := goldenBackup(t)
		return b[:len(b)-5]
	}, wantErr: kv.ErrBackupCorrupt, wantOff: func(b []byte) int64 { fr := backupFrames(b); return fr[len(fr)-1] }},
	{name: "version3.bin", make: func(t testing.TB) []byte {
		b := goldenBackup(t)
		b[6] = 3
		return b
	}, wantErr: kv.ErrBackupVersion, wantOff: func([]byte) int64 { return 6 }},
}

// goldenBackup is the backup of the store someWrites leaves.
func goldenBackup(t testing.TB) []byte {
	s, err := kv.Open("/d", &kv.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	someWrites(t, s)
	var buf bytes.Buffer
	if _, err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestBackupTestdata compares the files in testdata/backup/ with what
// Backup writes today (rewrite them with -update) and checks what
// decoding each gives.
func TestBackupTestdata(t *testing.T) {
	for _, tf := range backupTestdata {
		t.Run(tf.name, func(t *testing.T) {
			p := filepath.Join("testdata", "backup", tf.name)
			want := tf.make(t)
			if *update {
				if err := os.WriteFile(p, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("%s differs from what Backup writes (-want +got):\n%s", p, cmp.Diff(hex.Dump(want), hex.Dump(got)))
			}
			_, err = kv.DecodeBackup(got, nil)
			if tf.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			off := tf.wantOff(got)
			var ce *kv.CorruptError
			if !errors.Is(err, tf.wantErr) || !errors.As(err, &ce) || ce.Offset != off {
				t.Errorf("DecodeBackup: %v, want %v at offset %d", err, tf.wantErr, off)
			}
		})
	}
}

// TestBackupGoldenBySpec reads the golden backup field by field as
// FORMAT.md ("Snapshot", "Backup") lays it out, without the package's
// decoder: the header, the meta frame naming covered segment 0, the
// store's revision and key count, and the end frame's count and file
// checksum; and its content hash is the SHA-256 of the entry payloads.
func TestBackupGoldenBySpec(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "backup", "backup.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "KVSNAP" || binary.LittleEndian.Uint16(b[6:]) != 1 {
		t.Fatalf("header % x, want KVSNAP and version 1", b[:8])
	}
	frames := backupFrames(b)
	payload := func(off int64) (byte, []byte) {
		n := int64(binary.LittleEndian.Uint32(b[off+4:]))
		if crc := crc32.Checksum(b[off+4:off+9+n], castagnoli); crc != binary.LittleEndian.Uint32(b[off:]) {
			t.Errorf("frame at %d: CRC %#x, want %#x", off, binary.LittleEndian.Uint32(b[off:]), crc)
		}
		return b[off+8], b[off+9 : off+9+n]
	}
	typ, meta := payload(frames[0])
	if typ != 1 || len(meta) != 24 {
		t.Fatalf("first frame: type %d of %d bytes, want the meta frame (1) of 24", typ, len(meta))
	}
	covered, rev, count := binary.LittleEndian.Uint64(meta), binary.LittleEndian.Uint64(meta[8:]), binary.LittleEndian.Uint64(meta[16:])
	// someWrites: 8 records, 5 keys (a, b, c, t1 and a binary key).
	if covered != 0 || rev != 8 || count != 5 {
		t.Errorf("meta: covered %d, revision %d, count %d; want 0, 8, 5", covered, rev, count)
	}
	h := sha256.New()
	for _, off := range frames[1 : len(frames)-1] {
		typ, p := payload(off)
		if typ != 2 {
			t.Fatalf("frame at %d: type %d, want an entry (2)", off, typ)
		}
		h.Write(p)
	}
	endAt := frames[len(frames)-1]
	typ, end := payload(endAt)
	if typ != 3 || len(end) != 12 || binary.LittleEndian.Uint64(end) != count {
		t.Fatalf("end frame: type %d, % x", typ, end)
	}
	if got, want := binary.LittleEndian.Uint32(end[8:]), crc32.Checksum(b[:endAt], castagnoli); got != want {
		t.Errorf("end frame's file CRC %#x, want %#x", got, want)
	}
	if endAt+9+12 != int64(len(b)) {
		t.Errorf("bytes after the end frame")
	}
	d, err := kv.DecodeBackup(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.Hash[:], h.Sum(nil)) {
		t.Errorf("digest hash %s, want the SHA-256 of the entry payloads, %x", d.Hash, h.Sum(nil))
	}
}

// fixBackupChecksums returns b with the CRC of every whole frame, and the
// file CRC of an end frame of the right size, recomputed, so that fuzzed
// bytes reach the checks behind the checksums.
func fixBackupChecksums(b []byte) []byte {
	b = slices.Clone(b)
	for off := 8; off+9 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		if n > len(b)-off-9 {
			break
		}
		if b[off+8] == 3 && n == 12 {
			binary.LittleEndian.PutUint32(b[off+9+8:], crc32.Checksum(b[:off], castagnoli))
		}
		binary.LittleEndian.PutUint32(b[off:], crc32.Checksum(b[off+4:off+9+n], castagnoli))
		off += 9 + n
	}
	return b
}

// checkDecodeBackup checks DecodeBackup's promises on one input: no
// panic; an error is ErrBackupCorrupt or ErrBackupVersion naming an
// offset inside the input; memory bounded by the input's size; what it
// accepts yields entries in strictly ascending key order, as many as the
// digest counts, whose content hash, worked out here from FORMAT.md, is
// the digest's; and no proper prefix of it is accepted.
func checkDecodeBackup(t *testing.T, b []byte) {
	t.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	h := sha256.New()
	var prev []byte
	n := int64(0)
	d, err := kv.DecodeBackup(b, func(e kv.Entry) error {
		if n > 0 && bytes.Compare(prev, e.Key) >= 0 {
			t.Fatalf("entry %q after %q", e.Key, prev)
		}
		prev = append(prev[:0], e.Key...)
		var item []byte
		item = binary.LittleEndian.AppendUint64(item, uint64(e.CreateRev))
		item = binary.LittleEndian.AppendUint64(item, uint64(e.ModRev))
		item = binary.LittleEndian.AppendUint64(item, uint64(e.Version))
		item = binary.LittleEndian.AppendUint32(item, uint32(len(e.Key)))
		item = append(item, e.Key...)
		item = binary.LittleEndian.AppendUint32(item, uint32(len(e.Value)))
		item = append(item, e.Value...)
		h.Write(item)
		n++
		return nil
	})
	runtime.ReadMemStats(&ms)
	// The decoder keeps one frame's buffer, a 4 KiB reader and the
	// hasher's 64 KiB; the callback above copies each entry once more.
	if got, bound := ms.TotalAlloc-before, uint64(4*len(b))+512<<10; got > bound {
		t.Fatalf("DecodeBackup of %d bytes allocated %d bytes, bound %d", len(b), got, bound)
	}
	if err != nil {
		var ce *kv.CorruptError
		if !errors.Is(err, kv.ErrBackupCorrupt) && !errors.Is(err, kv.ErrBackupVersion) || !errors.As(err, &ce) {
			t.Fatalf("DecodeBackup error %v (%T) is not ErrBackupCorrupt or ErrBackupVersion in a *kv.CorruptError", err, err)
		}
		if ce.File != "backup" || ce.Offset < 0 || ce.Offset > int64(len(b)) {
			t.Fatalf("DecodeBackup error %v names %s offset %d, not an offset of the input", err, ce.File, ce.Offset)
		}
		return
	}
	if d.Keys != n {
		t.Fatalf("digest counts %d keys, %d entries yielded", d.Keys, n)
	}
	if !bytes.Equal(d.Hash[:], h.Sum(nil)) {
		t.Fatalf("digest hash %s, the entries hash to %x", d.Hash, h.Sum(nil))
	}
	for _, cut := range []int{len(b) - 1, len(b) / 2} {
		if _, err := kv.DecodeBackup(b[:cut], nil); !errors.Is(err, kv.ErrBackupCorrupt) {
			t.Fatalf("the first %d of %d bytes of a valid backup: %v, want ErrBackupCorrupt", cut, len(b), err)
		}
	}
}

// FuzzDecodeBackup feeds arbitrary bytes to DecodeBackup (see
// checkDecodeBackup), seeded from testdata/backup/.
func FuzzDecodeBackup(f *testing.F) {
	dir := filepath.Join("testdata", "backup")
	ents, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if len(ents) < len(backupTestdata) {
		f.Fatalf("%d seeds in %s, want %d (run TestBackupTestdata with -update)", len(ents), dir, len(backupTestdata))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeBackup(t, b)
		if fixed := fixBackupChecksums(b); !bytes.Equal(fixed, b) {
			checkDecodeBackup(t, fixed)
		}
	})
}
