package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
)

// TestVerifyBackupCatches: the check every timed backup passes fails on a
// backup cut short, on one of another revision, and on a key count that
// is not the store's.
func TestVerifyBackupCatches(t *testing.T) {
	dir := t.TempDir()
	s, err := kv.Open(filepath.Join(dir, "kv"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := load(s, 2500); err != nil {
		t.Fatal(err)
	}
	if _, err := backupFile(s, dir, 2500, true); err != nil {
		t.Fatalf("a good backup: %v", err)
	}
	if _, err := backupFile(s, dir, 2499, true); err == nil {
		t.Error("a backup of 2500 keys passed as one of 2499")
	}
	name := filepath.Join(dir, "b")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Backup(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyBackup(name, rev+1, 2500); err == nil {
		t.Error("a backup passed with another revision")
	}
	fi, _ := os.Stat(name)
	if err := os.Truncate(name, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	if err := verifyBackup(name, rev, 2500); err == nil {
		t.Error("a backup cut short passed")
	}
}

// TestRunSmall runs the whole benchmark on a small store and checks that
// the report has every row.
func TestRunSmall(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results.md")
	cfg := config{keys: 3000, writers: 4, dur: 150 * time.Millisecond, rounds: 2, dir: t.TempDir(), out: out}
	if err := run(cfg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"backup.mbs", "seqwrite.mbs", "put.p99.backup", "put.p99.checkpoint", "put.p99.none", "put.p99.discard",
		"backup.vs.seqwrite", "p99.backup.vs.none", "p99.backup.vs.checkpoint", "- commit: ", "- load: "} {
		if !strings.Contains(string(b), row) {
			t.Errorf("the results file has no %q", row)
		}
	}
}
