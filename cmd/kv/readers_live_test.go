package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveReaderRuns bounds how many times each read command runs beside the
// writer in TestReadersBesideLiveWriter, so that the test's time and
// memory are bounded whatever the machine's speed.
const liveReaderRuns = 150

// livePuts is how many puts the writer of TestReadersBesideLiveWriter
// commits: with 8 KiB segments and values of 100 bytes, some hundreds of
// rotations and dozens of checkpoints.
const livePuts = 20000

// liveBatch is how many puts the writer is given at once: about 8 KiB.
const liveBatch = 64

// TestReadersBesideLiveWriter is items 6 and 7 of issue 39: a watch
// follows the whole load and prints every revision once, and every read
// command runs in a loop beside a "kv DIR load" that rotates 8 KiB segments and
// checkpoints every 64 KiB, and must succeed, or fail with the busy
// status (exit 75) and message after its bound: never call the healthy
// directory corrupt. Afterwards check finds it clean.
func TestReadersBesideLiveWriter(t *testing.T) {
	bin := buildKV(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	small := []string{"--segment-size", "8k", "--checkpoint-bytes", "32k"}
	if out, err := exec.Command(bin, append([]string{dir, "put", "--create", "k00000", "v0"}, small...)...).CombinedOutput(); err != nil {
		t.Fatalf("kv DIR put --create: %v\n%s", err, out)
	}

	// A watch in another process follows the whole load, across its
	// rotations and checkpoints, and must print every revision once, in
	// order (checked after the load).
	_, watchOut, watchErr := startWatch(t, bin, dir, "--from", "1", "--json")
	watched := make(chan int64, 1) // the last revision in order, or -1 after a gap
	var watchGap string
	go func() {
		sc := bufio.NewScanner(watchOut)
		last := int64(0)
		defer func() { watched <- last }()
		for sc.Scan() {
			var ev struct {
				Revision int64 `json:"revision"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Revision != last+1 {
				watchGap = fmt.Sprintf("after revision %d the watch printed %q", last, sc.Text())
				last = -1
				return
			}
			if last = ev.Revision; last == livePuts+1 {
				return
			}
		}
	}()

	load := exec.Command(bin, append([]string{dir, "load", "--ack"}, small...)...)
	stdin, err := load.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	acks, err := load.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var loadErr bytes.Buffer
	load.Stderr = &loadErr
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 100)
	fed := make(chan struct{}) // the load's stdout is read to its end: Wait may close it
	go func() {
		defer close(fed)
		// A batch of puts, about a segment's worth, then wait for the
		// load to acknowledge its last: each batch is a group commit or
		// a few, and so a rotation, however fast the machine (the load
		// commits up to 512 operations at once when they are all there,
		// which makes few rotations of big segments).
		defer stdin.Close()
		sc := bufio.NewScanner(acks)
		var batch bytes.Buffer
		for i := 1; i <= livePuts; i++ {
			fmt.Fprintf(&batch, "put k%05d %s%d\n", i%2000, value, i)
			if i%liveBatch != 0 && i != livePuts {
				continue
			}
			if _, err := stdin.Write(batch.Bytes()); err != nil {
				return
			}
			batch.Reset()
			for want := fmt.Sprintf("ack %d", i); sc.Scan() && sc.Text() != want; {
			}
		}
		stdin.Close() // the load ends at the end of its input
		io.Copy(io.Discard, acks)
	}()
	var done atomic.Bool
	loadDone := make(chan error, 1)
	go func() { <-fed; loadDone <- load.Wait(); done.Store(true) }()

	readers := [][]string{
		{"get", "k00000"},
		{"scan"},
		{"dump", "--read-only"},
		{"stat"},
		{"check"},
		{"lease", "list"},
		{"backup", filepath.Join(tmp, "b.kvbackup")},
	}
	type failure struct {
		args   string
		code   int
		stderr string
	}
	var (
		mu       sync.Mutex
		failures []failure // at most one per command: the first
		runs     = make([]int, len(readers))
		busy     = make([]int, len(readers))
		wg       sync.WaitGroup
	)
	for i, args := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < liveReaderRuns && !done.Load(); n++ {
				cmd := exec.Command(bin, append([]string{dir}, args...)...)
				cmd.Stdout = io.Discard
				var stderr limitedBuffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				runs[i]++
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					code = -1
				}
				switch {
				case code == 0:
				case code == exitTempFail && strings.Contains(stderr.String(), "is changing faster than a reader can read it"):
					busy[i]++
				default:
					mu.Lock()
					failures = append(failures, failure{strings.Join(args, " "), code, stderr.String()})
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := <-loadDone; err != nil {
		t.Fatalf("kv DIR load: %v\n%s", err, loadErr.String())
	}
	for i, args := range readers {
		t.Logf("kv DIR %s: %d runs beside the writer, %d busy", strings.Join(args, " "), runs[i], busy[i])
	}
	for _, f := range failures {
		t.Errorf("kv DIR %s beside a live writer: exit %d\n%s", f.args, f.code, f.stderr)
	}
	select {
	case last := <-watched:
		if last != livePuts+1 {
			t.Errorf("the watch beside the writer: %s, ended at revision %d of %d: %s", watchGap, last, livePuts+1, watchErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Errorf("the watch beside the writer had not printed revision %d 60 s after the load ended", livePuts+1)
	}
	if out, err := exec.Command(bin, dir, "check").CombinedOutput(); err != nil {
		t.Errorf("kv DIR check after the writer exited: %v\n%s", err, out)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "log.*")); len(segs) > 0 {
		t.Logf("newest segment after the load: %s", filepath.Base(segs[len(segs)-1]))
	}
}

// limitedBuffer keeps the first 2 KiB written to it: a command's stderr,
// bounded.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 2048 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return l.b.String() }
