package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchBehindAcrossCheckpoints is item 7 of issue 39: "kv DIR watch"
// in another process, stalled (its output not read) while "kv DIR load"
// writes about 2.8 MB of log in 64 KiB segments with a checkpoint every
// 512 KiB, far more than the 16 segments a watch opens ahead. The writer's
// checkpoints keep the newest 4 MiB of the log they cover (the default
// retention), so once read again the watch prints every revision, in
// order, and ends with none missing; without the retention it ends with
// "revision N is no longer in the log".
func TestWatchBehindAcrossCheckpoints(t *testing.T) {
	bin := buildKV(t)
	dir := filepath.Join(t.TempDir(), "data")
	small := []string{"--segment-size", "64k", "--checkpoint-bytes", "512k"}
	if out, err := exec.Command(bin, append([]string{dir, "put", "--create", "k", "v"}, small...)...).CombinedOutput(); err != nil {
		t.Fatalf("kv DIR put --create: %v\n%s", err, out)
	}

	watch, stdout, stderr := startWatch(t, bin, dir, "--from", "2", "--json")

	// The load runs while nothing reads the watch: once the pipe's 64 KiB
	// fill, the watch stalls a few hundred revisions in.
	const puts = 20000
	var in bytes.Buffer
	value := strings.Repeat("v", 100)
	for i := range puts {
		fmt.Fprintf(&in, "put k%05d %s\n", i%3000, value)
	}
	load := exec.Command(bin, append([]string{dir, "load"}, small...)...)
	load.Stdin = &in
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("kv DIR load: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, dir, "stat").CombinedOutput()
	if err != nil {
		t.Fatalf("kv DIR stat: %v\n%s", err, out)
	}
	var covered string
	var snapRev int64
	if _, err := fmt.Sscanf(string(out), "snapshot  covers log.%s  revision %d", &covered, &snapRev); err != nil || snapRev < puts/2 {
		t.Fatalf("the load made no checkpoint past revision %d (%v):\n%s", puts/2, err, out)
	}
	if n, err := strconv.Atoi(covered); err != nil || n <= 16 {
		t.Fatalf("the snapshot covers log.%s, want more than the 16 segments a watch opens ahead:\n%s", covered, out)
	}

	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	want, last := int64(2), int64(1+puts)
	timeout := time.After(60 * time.Second)
	for want <= last {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				watch.Wait()
				t.Fatalf("watch ended at revision %d of %d: %s", want-1, last, stderr.String())
			}
			line = l
		case <-timeout:
			t.Fatalf("watch at revision %d of %d after 60 s", want-1, last)
		}
		var ev struct {
			Revision int64 `json:"revision"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch printed %q: %v", line, err)
		}
		if ev.Revision != want {
			t.Fatalf("revision %d after %d: a gap or a repeat", ev.Revision, want-1)
		}
		want++
	}
	watch.Process.Signal(syscall.SIGTERM)
	if err := watch.Wait(); err != nil {
		t.Errorf("watch after SIGTERM: %v\n%s", err, stderr.String())
	}
	t.Logf("the watch read revisions 2 to %d, behind a load that checkpointed up to revision %d", last, snapRev)
}
