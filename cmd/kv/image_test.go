package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// TestImageSnapshotCommands: the commands that read a data directory
// (get, dump, stat, check, dump --salvage) work on one whose snapshot is
// an image (version 4), and check and salvage name a damaged block by
// file and offset.
func TestImageSnapshotCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"c", "3"}} {
		if code, _, errb := kvRun(t, "", dir, "put", "--create", kv[0], kv[1]); code != 0 {
			t.Fatalf("put: %s", errb)
		}
	}
	if code, _, errb := kvRun(t, "", dir, "checkpoint"); code != 0 {
		t.Fatalf("checkpoint: %s", errb)
	}
	if code, _, errb := kvRun(t, "", dir, "put", "d", "4"); code != 0 {
		t.Fatalf("put: %s", errb)
	}
	var meta snapshot.Meta
	var entries []record.Entry
	err := image.ReadAny(vfs.OS, filepath.Join(dir, snapshot.Name), func(m snapshot.Meta) error { meta = m; return nil }, nil, func(e *record.Entry) error {
		c := *e
		c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
		entries = append(entries, c)
		return nil
	})
	if err != nil || len(entries) != 3 {
		t.Fatalf("the snapshot: %d entries, %v", len(entries), err)
	}
	ps := make([]*record.Entry, len(entries))
	for i := range entries {
		ps[i] = &entries[i]
	}
	if err := image.Write(vfs.OS, dir, snapshot.Name, meta, nil, slices.Values(ps), image.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "b"}, "2"},
		{[]string{"get", "d"}, "4"},
		{[]string{"dump", "--read-only"}, "c"},
		{[]string{"stat"}, ""},
		{[]string{"check"}, ""},
		{[]string{"dump", "--salvage"}, "a"},
	} {
		code, out, errb := kvRun(t, "", append([]string{dir}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("kv DIR %s: exit %d, stdout %q, stderr %q", strings.Join(c.args, " "), code, out, errb)
		}
	}
	// None of them wrote a snapshot: the image is still there. A byte
	// of its block (page 1) flipped.
	name := filepath.Join(dir, snapshot.Name)
	b, err := vfs.ReadFile(vfs.OS, name)
	if err != nil || len(b) < 2*image.PageSize || b[6] != image.Version {
		t.Fatalf("the snapshot after the commands: %d bytes, %v", len(b), err)
	}
	b[image.PageSize+40] ^= 0x10
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errb := kvRun(t, "", dir, "check")
	if code == 0 || !strings.Contains(out+errb, name+" offset 4096") {
		t.Errorf("kv DIR check of a damaged image: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	code, out, errb = kvRun(t, "", dir, "dump", "--salvage")
	if code == 0 || !strings.Contains(out+errb, name+" bytes 4096-8192 unreadable") || !strings.Contains(out, "d") {
		t.Errorf("kv DIR salvage of a damaged image: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	// The store opens over the damaged block (its log touches no key in
	// it), and every command that reads the block fails naming it, dump
	// and scan included, rather than print a map without its keys.
	for _, args := range [][]string{{"get", "b"}, {"dump", "--read-only"}, {"scan"}, {"dump"}} {
		code, out, errb := kvRun(t, "", append([]string{dir}, args...)...)
		if code == 0 || !strings.Contains(errb, name+" offset 4096") {
			t.Errorf("kv DIR %s over a damaged block: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errb)
		}
	}
	if code, out, errb := kvRun(t, "", dir, "get", "d"); code != 0 || out != "4\n" {
		t.Errorf("kv DIR get d, a key of the log: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}
