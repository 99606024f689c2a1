package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"
)

// TestMain lets the test binary serve as the benchmark's child process.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "-child" {
		if err := runChild(os.Args[2]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRun runs the whole benchmark on a small data set: every engine
// built, opened warm and cold in a child, every Get and scan checked. No
// timing is asserted.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four stores")
	}
	out := filepath.Join(t.TempDir(), "out.md")
	if err := run(3000, 1, 20*time.Millisecond, t.TempDir(), out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| open |", "| random Gets, 1 goroutine (per second) |", "| cold open |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the report has no row %q", want)
		}
	}
}

// TestChildChecks shows the child's checks failing: a store that holds
// a wrong value, and one that lacks keys.
func TestChildChecks(t *testing.T) {
	dir := t.TempDir()
	if err := build("bbolt", dir, 500); err != nil {
		t.Fatal(err)
	}
	task := func(keys int) string {
		b, _ := json.Marshal(task{Engine: "bbolt", Dir: dir, Keys: keys, GetDur: time.Millisecond})
		return string(b)
	}
	// The data set has 500 keys: a child told of 600 misses some.
	if err := runChild(task(600)); err == nil {
		t.Errorf("a store missing keys passed")
	}
	var k [keySize]byte
	var v [valueSize]byte
	key := dataset.Key(k[:], 3)
	wrong := bytes.Clone(dataset.Value(v[:], key, 0))
	wrong[valueSize-1] ^= 1
	if err := dataset.CheckAt(key, wrong, 0); err == nil {
		t.Errorf("a wrong value passed checkValue")
	}
	if err := dataset.CheckAt(key, dataset.Value(v[:], key, 0), 0); err != nil {
		t.Errorf("the right value failed: %v", err)
	}
}
