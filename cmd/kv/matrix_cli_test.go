package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
)

// prepareCLIMatrix writes a directory like the corruption matrix's (package
// kv): 25 operations, a checkpoint, 35 more, each synced on its own, with
// 512-byte segments, on the real file system. It returns the directory and
// the dump the store gives.
func prepareCLIMatrix(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "prepared")
	s, err := kv.Open(dir, &kv.Options{SegmentSize: 512, CheckpointBytes: -1, LogRetention: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if i == 25 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		op := kv.AddOp([]byte("c"), int64(i+1))
		if i%3 == 1 {
			op = kv.PutOp(fmt.Appendf(nil, "k%d", i%7), bytes.Repeat([]byte("v"), i))
		}
		if _, _, err := s.Submit(op).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	code, dump, stderr := kvRun(t, "", dir, "dump", "--read-only")
	if code != 0 {
		t.Fatalf("dump of the prepared directory: %s", stderr)
	}
	return dir, dump
}

// copyDir copies the files of from into a new directory.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	return to
}

// readDir returns the contents of every file in dir but LOCK.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.Name() == kv.LockName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// segments returns the segment file names of dir, ascending.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log.??????"))
	if err != nil || len(m) < 4 {
		t.Fatalf("segments of %s: %v %v", dir, m, err)
	}
	return m
}

// recordStarts returns the offsets of the records of a segment file.
func recordStarts(b []byte) []int {
	var out []int
	for off := 0; off+24 <= len(b) && b[off] != 0; off += 24 + int(binary.LittleEndian.Uint32(b[off+4:])) {
		out = append(out, off)
	}
	return out
}

func editFile(t *testing.T, name string, f func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, f(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCLIOnMatrix runs a sample of the corruption matrix through the
// command: for each damage that no crash can cause, `kv DIR check` exits 1
// naming the damaged file, `kv DIR dump` exits 1 and changes nothing,
// `kv DIR repair --yes` keeps the evidence as .broken files and then dump
// and check succeed. Crash-shaped damage (the newest segment cut inside
// its last record) is reported by check as a note, with exit 0.
func TestCLIOnMatrix(t *testing.T) {
	prepared, full := prepareCLIMatrix(t)
	segs := segments(t, prepared)
	first, middle, newest := filepath.Base(segs[0]), filepath.Base(segs[1]), filepath.Base(segs[len(segs)-1])
	tests := []struct {
		name   string
		damage func(dir string)
		names  string // the file check must name
	}{
		{"flip a byte in a sealed segment", func(dir string) {
			editFile(t, filepath.Join(dir, middle), func(b []byte) []byte { b[recordStarts(b)[2]+30] ^= 0x04; return b })
		}, middle},
		{"flip a byte in the snapshot", func(dir string) {
			editFile(t, filepath.Join(dir, "snapshot"), func(b []byte) []byte { b[len(b)/2] ^= 0x80; return b })
		}, "snapshot"},
		{"flip a length bit in the middle of the newest segment", func(dir string) {
			editFile(t, filepath.Join(dir, newest), func(b []byte) []byte {
				rs := recordStarts(b)
				b[rs[len(rs)/2]+5] ^= 0x01
				return b
			})
		}, newest},
		{"truncate a sealed segment inside a record", func(dir string) {
			editFile(t, filepath.Join(dir, middle), func(b []byte) []byte { return b[:recordStarts(b)[3]+10] })
		}, middle},
		{"zero the first sector of a sealed segment", func(dir string) {
			editFile(t, filepath.Join(dir, first), func(b []byte) []byte { clear(b[:512]); return b })
		}, first},
		{"garbage after a seal", func(dir string) {
			editFile(t, filepath.Join(dir, first), func(b []byte) []byte { return append(b, "garbage"...) })
		}, first},
		{"delete a middle segment", func(dir string) {
			if err := os.Remove(filepath.Join(dir, middle)); err != nil {
				t.Fatal(err)
			}
		}, middle},
		{"delete the segment after the snapshot's", func(dir string) {
			if err := os.Remove(filepath.Join(dir, first)); err != nil {
				t.Fatal(err)
			}
		}, first},
		{"duplicate the newest segment under the next number", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, newest))
			var n int
			fmt.Sscanf(newest, "log.%d", &n)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("log.%06d", n+1)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, newest},
		{"delete the snapshot", func(dir string) {
			if err := os.Remove(filepath.Join(dir, "snapshot")); err != nil {
				t.Fatal(err)
			}
		}, "snapshot"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, prepared)
			tc.damage(dir)
			before := readDir(t, dir)
			code, stdout, _ := kvRun(t, "", dir, "check")
			if code != 1 || !strings.Contains(stdout, "corrupt: "+filepath.Join(dir, tc.names)) {
				t.Errorf("check: exit %d, want 1 naming %s:\n%s", code, tc.names, stdout)
			}
			code, stdout, stderr := kvRun(t, "", dir, "dump")
			if code != 1 || stdout != "" || !strings.Contains(stderr, "corrupt") {
				t.Errorf("dump of a corrupt directory: exit %d, %q, %q", code, stdout, stderr)
			}
			if d := diffDirs(before, readDir(t, dir)); d != "" {
				t.Errorf("a refused dump changed files: %s", d)
			}
			code, stdout, stderr = kvRun(t, "", dir, "repair", "--yes")
			if code != 0 {
				t.Fatalf("repair --yes: exit %d\n%s%s", code, stdout, stderr)
			}
			after := readDir(t, dir)
			broken := 0
			for n, b := range before {
				if a, ok := after[n]; ok && (a == b || onlyZerosReplaced(b, a)) {
					continue // the repair's skip went where there were zeros
				}
				if after[n+".broken"] != b {
					t.Errorf("repair changed %s without keeping %s.broken", n, n)
				}
				broken++
			}
			if broken == 0 && !strings.Contains(tc.name, "delete") {
				t.Errorf("repair changed no file:\n%s", stdout)
			}
			if code, stdout, stderr := kvRun(t, "", dir, "dump"); code != 0 {
				t.Errorf("dump after repair: exit %d %q %q", code, stdout, stderr)
			}
			if code, stdout, _ := kvRun(t, "", dir, "check"); code != 0 || !strings.HasPrefix(stdout, "ok:") {
				t.Errorf("check after repair: exit %d\n%s", code, stdout)
			}
		})
	}

	t.Run("crash-shaped: newest segment cut in its last record", func(t *testing.T) {
		dir := copyDir(t, prepared)
		editFile(t, filepath.Join(dir, newest), func(b []byte) []byte {
			rs := recordStarts(b)
			last := rs[len(rs)-1]
			for _, r := range rs {
				if b[r] == 2 { // the last data record, not the mark after it
					last = r
				}
			}
			return b[:last+30]
		})
		code, stdout, _ := kvRun(t, "", dir, "check")
		if code != 0 || !strings.Contains(stdout, "note: "+filepath.Join(dir, newest)) || !strings.Contains(stdout, "torn tail") {
			t.Errorf("check of a torn tail: exit %d, want 0 with a note:\n%s", code, stdout)
		}
		code, stdout, stderr := kvRun(t, "", dir, "dump")
		if code != 0 || stdout == full || stdout == "" {
			t.Errorf("dump of a torn tail: exit %d %q %q: want the map without the last operation", code, stdout, stderr)
		}
	})
}

func diffDirs(before, after map[string]string) string {
	var d []string
	for n, b := range before {
		if a, ok := after[n]; !ok || a != b {
			d = append(d, n)
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			d = append(d, n+" (new)")
		}
	}
	return strings.Join(d, ", ")
}

// onlyZerosReplaced reports whether after keeps every byte of before
// that is not a trailing zero: a record written where the log had
// reserved space loses nothing.
func onlyZerosReplaced(before, after string) bool {
	p := 0
	for p < len(before) && p < len(after) && before[p] == after[p] {
		p++
	}
	return strings.Trim(before[p:], "\x00") == ""
}
