package main

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/kvstore/kv/internal/kvcli"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// buildKV builds kv into the test's temporary directory, for a test that
// runs it as processes of its own (the build cache makes all but the
// first build quick), and returns its path.
func buildKV(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds kv and runs it as processes of its own")
	}
	bin := filepath.Join(t.TempDir(), "kv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// loadKilledAtAck runs "kv DIR load --ack" on n puts and SIGKILLs it the
// moment it prints "ack n", before its writer can mark the log (a
// millisecond after it goes idle): the last acknowledged writes are then
// durable, but no record of the log says so.
func loadKilledAtAck(t *testing.T, bin, dir string, n int, extra ...string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{dir, "load", "--ack"}, extra...)...)
	var in bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&in, "put k%04d v%d\n", i, i)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Stdin stays open: load does not end, and close, on its own.
	if _, err := stdin.Write(in.Bytes()); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("ack %d", n)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == last {
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	cmd.Wait()
	stdin.Close()
	if sc.Err() != nil || !strings.Contains(sc.Text(), last) {
		t.Fatalf("load printed no %q before it ended: %v\n%s", last, sc.Err(), stderr.String())
	}
}

// TestReadersAfterKill: after a writer is killed right after it
// acknowledged its last write (items 2 and 3 of issue 39), every command
// that reads shows every acknowledged write, and none changes a byte of
// any file of the directory (each is checked by hashing every file before
// and after it): dump --read-only, get, scan, backup, verify, stat,
// check, log, watch and dump --salvage. At several kill points, with
// segments small enough that the last writes span a rotation.
func TestReadersAfterKill(t *testing.T) {
	bin := buildKV(t)
	for _, c := range []struct {
		n     int
		extra []string
	}{
		{1, nil},
		{7, nil},
		{50, nil},
		{300, []string{"--segment-size", "4096"}},
	} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "data")
			loadKilledAtAck(t, bin, dir, c.n, c.extra...)
			before := hashDir(t, dir)
			want := ""
			for i := 1; i <= c.n; i++ {
				want += fmt.Sprintf("k%04d=v%d\n", i, i)
			}
			backup := filepath.Join(tmp, "b.kvbackup")
			for _, r := range []struct {
				args  []string
				check func(stdout string) bool
			}{
				{[]string{"dump", "--read-only"}, func(out string) bool { return out == want }},
				{[]string{"get", fmt.Sprintf("k%04d", c.n)}, func(out string) bool { return out == fmt.Sprintf("v%d\n", c.n) }},
				{[]string{"scan"}, func(out string) bool { return strings.Count(out, "\n") == c.n }},
				{[]string{"backup", backup}, func(out string) bool { return strings.Contains(out, kvcli.Plural(int64(c.n), "key")+",") }},
				{[]string{"verify", "--against", backup}, func(out string) bool { return strings.Contains(out, "same map") }},
				{[]string{"stat"}, func(string) bool { return true }},
				{[]string{"check"}, func(string) bool { return true }},
				{[]string{"log"}, func(out string) bool { return strings.Contains(out, fmt.Sprintf("k%04d", c.n)) }},
				{[]string{"watch", "--from", "1", "--count", fmt.Sprint(c.n)}, func(out string) bool { return strings.Count(out, "\n") == c.n }},
				{[]string{"dump", "--salvage"}, func(out string) bool { return out == want }},
			} {
				cmd := exec.Command(bin, append([]string{dir}, r.args...)...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				if err != nil || !r.check(stdout.String()) {
					t.Errorf("kv DIR %s after the writer was killed at ack %d: %v\nstdout: %.300q\nstderr: %s",
						strings.Join(r.args, " "), c.n, err, stdout.String(), stderr.String())
				}
				if after := hashDir(t, dir); !maps.Equal(before, after) {
					t.Fatalf("kv DIR %s changed the directory:\nbefore %v\nafter  %v", strings.Join(r.args, " "), before, after)
				}
			}
		})
	}
}
