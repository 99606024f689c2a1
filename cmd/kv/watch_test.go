package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
)

// TestWatchAcrossWriters runs "kv DIR watch --from 1 --json" in a process
// of its own while other kv processes write: one-shot puts (a writer's
// open and close each), a checkpoint, a load killed with SIGKILL in the
// middle of its writes, the recovery after it. The watch must print
// every revision once, in order, none missing, and the map its events
// build must be the one kv DIR dump prints at the end.
func TestWatchAcrossWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kv and runs writer processes")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "kv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "data")
	kvRun := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kv %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kvRun("put", "--create", "k0", "v0")

	watch, stdout, stderr := startWatch(t, bin, dir, "--from", "1", "--json", "--prev")
	lines := make(chan string, 10000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	for i := range 10 {
		kvRun("put", fmt.Sprint("k", i%4), fmt.Sprint("one-shot ", i))
	}
	kvRun("del", "k3")
	kvRun("checkpoint")

	// A writer killed mid-load: what it made durable is watched, what it
	// did not is never printed (its recovery may cut it). The kill comes
	// on a count, not after a time a loaded machine may spend starting
	// the load: once it has acknowledged loadAcks operations as durable
	// (--ack). What it is fed is bounded too, at loadPairs adds and puts,
	// and it cannot get through them: once the test stops reading its
	// acks, it commits at most a pipe's worth of acks and its window
	// more before it waits.
	const loadAcks, loadPairs = 200, 100_000
	load := exec.Command(bin, dir, "load", "--ack")
	in, err := load.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	acks, err := load.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	defer load.Process.Kill()
	go func() {
		for i := range loadPairs {
			if _, err := fmt.Fprintf(in, "add c 1\nput l%d v%d\n", i%50, i); err != nil {
				return
			}
		}
	}()
	acked := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(acks)
		for sc.Scan() {
			var n int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &n); err != nil {
				acked <- fmt.Errorf("load printed %q", sc.Text())
				return
			}
			if n >= loadAcks {
				acked <- nil
				return
			}
		}
		acked <- fmt.Errorf("load ended before its ack %d (%v)", loadAcks, sc.Err())
	}()
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("load acknowledged fewer than %d operations in 30 s", loadAcks)
	}
	load.Process.Signal(syscall.SIGKILL)
	load.Wait()
	in.Close()

	for i := range 5 {
		kvRun("put", fmt.Sprint("after", i), "v")
	}
	end := kvRun("put", "end", "v")
	var endRev int64
	if _, err := fmt.Sscanf(end, "revision %d", &endRev); err != nil {
		t.Fatalf("put printed %q", end)
	}

	model := map[string]string{}
	last := int64(0)
	timeout := time.After(30 * time.Second)
	for last < endRev {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended at revision %d of %d: %s", last, endRev, stderr.String())
			}
			line = l
		case <-timeout:
			t.Fatalf("watch at revision %d of %d after 30 s", last, endRev)
		}
		var ev struct {
			Type     string  `json:"type"`
			Revision int64   `json:"revision"`
			Key      string  `json:"key"`
			Value    *string `json:"value"`
			ModRev   int64   `json:"mod_revision"`
			Prev     *struct {
				Value *string `json:"value"`
			} `json:"prev"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch printed %q: %v", line, err)
		}
		if ev.Revision != last+1 {
			t.Fatalf("revision %d after %d: a gap or a repeat (%s)", ev.Revision, last, line)
		}
		last = ev.Revision
		old, had := model[ev.Key]
		if had != (ev.Prev != nil) || (had && *ev.Prev.Value != old) {
			t.Errorf("revision %d: prev %+v, the model had %q (%v)", last, ev.Prev, old, had)
		}
		switch ev.Type {
		case "put":
			model[ev.Key] = *ev.Value
		case "del":
			delete(model, ev.Key)
		default:
			t.Fatalf("type %q in %s", ev.Type, line)
		}
	}
	if want := kvRun("dump"); opmodel.Dump(model) != want {
		t.Errorf("the watch's map differs from dump's:\n%s", opmodel.Describe(mustParseDump(t, want), model))
	}
	if model["c"] == "" {
		t.Errorf("no add of the killed load was watched (c=%q): the kill came too early to test anything", model["c"])
	}
	watch.Process.Signal(syscall.SIGTERM)
	if err := watch.Wait(); err != nil {
		t.Errorf("watch after SIGTERM: %v\n%s", err, stderr.String())
	}
}

// startWatch starts "kv DIR watch ARGS..." and returns the process, its
// stdout, for the caller to read (or not, to stall it), and the start of
// its stderr. The process is killed when the test ends.
func startWatch(t *testing.T, bin, dir string, args ...string) (*exec.Cmd, io.Reader, *limitedBuffer) {
	t.Helper()
	watch := exec.Command(bin, append([]string{dir, "watch"}, args...)...)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(limitedBuffer)
	watch.Stderr = stderr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watch.Process.Kill(); watch.Wait() })
	return watch, stdout, stderr
}

func mustParseDump(t *testing.T, s string) map[string]string {
	t.Helper()
	m, err := opmodel.ParseDump(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
