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
		if code, _, stderr := kvRun(t, "", dir, "put", "--create", fmt.Sprintf("k%02d", i), fmt.Sprintf("value-%02d", i)); code != 0 {
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
	for _, want := range []string{"log.000001 bytes ", " unreadable", fmt.Sprintf("revision %d: no readable record holds it", lost+1), "29 keys read"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if d := hashDir(t, dir); fmt.Sprint(d) != fmt.Sprint(before) {
		t.Errorf("salvage changed the directory:\nbefore %v\nafter  %v", before, d)
	}
}

// TestRepairPlanListsDrops: kv DIR repair --verbose without --yes names every
// record its plan drops (revision, operation, file and offset) and the
// unreadable bytes, exits 1, and changes nothing.
func TestRepairPlanListsDrops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for i := range 10 {
		if code, _, stderr := kvRun(t, "", dir, "put", "--create", fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)); code != 0 {
			t.Fatal(stderr)
		}
	}
	var offs []int64
	rd := &wal.Reader{FS: vfs.OS, Dir: dir}
	if _, err := rd.Scan(1, true, func(r wal.Record) error { offs = append(offs, r.Offset); return nil }); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, wal.SegmentName(1))
	b, _ := os.ReadFile(seg)
	b[offs[4]+30] ^= 0x10 // revision 5
	os.WriteFile(seg, b, 0o600)
	before := hashDir(t, dir)
	code, out, _ := kvRun(t, "", dir, "repair", "--verbose")
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	for i := 6; i <= 10; i++ {
		want := fmt.Sprintf("drops revision %d at %s offset %d: put k%d v%d", i, seg, offs[i-1], i-1, i-1)
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "drops unreadable "+seg+" bytes ") {
		t.Errorf("the plan does not name the unreadable bytes:\n%s", out)
	}
	after := hashDir(t, dir)
	delete(before, "LOCK")
	delete(after, "LOCK")
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("the plan changed the directory")
	}
}
