package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestOneShotSyscalls: in steady state, a process that opens a small store,
// commits one write and closes (kv DIR put) issues one fdatasync and at
// most one directory fsync, creates no file, and 50 such processes start
// at most one new segment. It runs the real binary under strace, which
// reports each sync with the path of its descriptor (-y); it is skipped
// where strace is not installed (apt-get install strace).
func TestOneShotSyscalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kv and runs 50 processes under strace")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: the system calls cannot be watched")
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "kv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "data")
	// The steady state: a store that exists, with a snapshot and a log.
	for i := range 3 {
		if out, err := exec.Command(bin, dir, "put", "--create", fmt.Sprintf("warm%d", i), "v").CombinedOutput(); err != nil {
			t.Fatalf("put: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command(bin, dir, "checkpoint").CombinedOutput(); err != nil {
		t.Fatalf("checkpoint: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, dir, "put", "warm", "v").CombinedOutput(); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	segments := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "log.*"))
		return m
	}
	list := func() []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	before := segments()
	syncRE := regexp.MustCompile(`^(?:\d+\s+)?(fsync|fdatasync)\(\d+<([^>]*)>`)
	for i := range 50 {
		names := list()
		trace := filepath.Join(tmp, "trace")
		cmd := exec.Command(strace, "-f", "-y", "-e", "trace=fsync,fdatasync,sync,syncfs", "-o", trace,
			bin, dir, "put", fmt.Sprintf("k%d", i), "v")
		if out, err := cmd.CombinedOutput(); err != nil {
			if strings.Contains(string(out), "ptrace") || strings.Contains(string(out), "Operation not permitted") {
				t.Skipf("strace cannot trace here: %s", out)
			}
			t.Fatalf("put %d under strace: %v\n%s", i, err, out)
		}
		b, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		fdatasyncs, dirsyncs := 0, 0
		var calls []string
		for _, line := range strings.Split(string(b), "\n") {
			m := syncRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			calls = append(calls, m[1]+" "+filepath.Base(m[2]))
			switch {
			case m[1] == "fdatasync" && strings.HasPrefix(filepath.Base(m[2]), "log."):
				fdatasyncs++
			case m[1] == "fsync" && m[2] == dir:
				dirsyncs++
			default:
				t.Errorf("put %d: %s of %s, which a one-shot write has no reason to sync", i, m[1], m[2])
			}
		}
		if fdatasyncs != 1 || dirsyncs > 1 {
			t.Errorf("put %d: %d fdatasyncs of the log and %d directory fsyncs (%v); want 1 and at most 1", i, fdatasyncs, dirsyncs, calls)
		}
		if after := list(); !slices.Equal(names, after) {
			t.Errorf("put %d changed the directory's names: %v -> %v", i, names, after)
		}
	}
	if after := segments(); len(after) > len(before)+1 {
		t.Errorf("50 one-shot puts started %d segments (%v -> %v), want at most one", len(after)-len(before), before, after)
	}
	out, err := exec.Command(bin, dir, "get", "k49").CombinedOutput()
	if err != nil || string(out) != "v\n" {
		t.Errorf("get k49 after the puts: %v %q", err, out)
	}
}
