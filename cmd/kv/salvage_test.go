package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// hashDir returns every file under dir with the SHA-256 of its bytes.
func hashDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return out
}

// TestDumpSalvage: kv DIR dump --salvage on a directory whose log holds a
// damaged record prints every key it can read, names on stderr the
// damaged bytes and the revision no readable record holds, exits 1, and
// leaves every file as it was (no LOCK either); recovery refuses the
// same directory. On a whole directory it prints what dump prints and
// exits 0.
func TestDumpSalvage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for i := range 30 {
		// One write each, so that every record is followed by one that
		// claims it synced: the damage is corruption, not a torn tail.
		if code, _, stderr := kvRun(t, "", dir, "put", fmt.Sprintf("k%02d", i), fmt.Sprintf("value-%02d", i)); code != 0 {
			t.Fatal(stderr)
		}
	}
	code, whole, stderr := kvRun(t, "", dir, "dump", "--salvage")
	if code != 0 || stderr != "" || strings.Count(whole, "\n") != 30 {
		t.Fatalf("salvage of a whole store: exit %d, stderr %q, %d lines", code, stderr, strings.Count(whole, "\n"))
	}
	seg := filepath.Join(dir, wal.SegmentName(1))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// A byte in the payload of the tenth data record.
	var offs []int64
	rd := &wal.Reader{FS: vfs.OS, Dir: dir}
	if _, err := rd.Scan(1, true, func(r wal.Record) error { offs = append(offs, r.Offset); return nil }); err != nil || len(offs) != 30 {
		t.Fatalf("scan: %v, %d records", err, len(offs))
	}
	b[offs[9]+30] ^= 0x10
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "LOCK"))
	before := hashDir(t, dir)
	if code, _, stderr := kvRun(t, "", dir, "dump"); code == 0 || !strings.Contains(stderr, "corrupt") {
		t.Fatalf("dump of the damaged store: exit %d, %q", code, stderr)
	}
	os.Remove(filepath.Join(dir, "LOCK"))
	code, out, stderr := kvRun(t, "", dir, "dump", "--salvage")
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	if n := strings.Count(out, "\n"); n != 29 {
		t.Errorf("salvage printed %d keys, want the 29 whose records read:\n%s", n, out)
	}
	lost := -1
	for i := range 30 {
		if !strings.Contains(out, fmt.Sprintf("k%02d=value-%02d\n", i, i)) {
			lost = i
		}
	}
	for _, want := range []string{"log.000001 bytes ", " unreadable", fmt.Sprintf("revisions %d: no readable record holds them", lost+1), "29 keys read"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if d := hashDir(t, dir); fmt.Sprint(d) != fmt.Sprint(before) {
		t.Errorf("salvage changed the directory:\nbefore %v\nafter  %v", before, d)
	}
}
