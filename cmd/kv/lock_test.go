package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRewriteLockArgs(t *testing.T) {
	root := newRoot(nil, nil, nil)
	tests := []struct{ in, want string }{
		{"data lock job -- ls -l", "lock data job -- ls -l"},
		{"data lock job --wait 5s -- ls --wait 1", "lock data job --wait 5s -- ls --wait 1"},
		{"--wait 5s data lock job -- data dump", "--wait 5s lock data job -- data dump"},
		{"data lock --slots 3 job -- sh", "lock data --slots 3 job -- sh"},
		{"data locks sweep", "locks data sweep"},
		{"data put k v --fence job:7", "put data k v --fence job:7"},
	}
	for _, tc := range tests {
		got := strings.Join(rewriteArgs(root, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("rewriteArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLockShellLoops is acceptance test 11: 16 shell loops run "kv DIR
// lock" around a critical section that appends start and end lines with
// $KV_FENCE_TOKEN to one file. No two sections interleave, and the
// tokens strictly increase. The longest wait (from the loop starting kv
// to the command starting, kv's own start included) is reported.
func TestLockShellLoops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kv and runs 64 lock cycles")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "kv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "data")
	file := filepath.Join(tmp, "section")
	// No store yet: the first round's 16 processes create it together
	// (--create), and the ones that lose that race wait for its marker
	// before they make their holder files beside it.
	loops, rounds := 16, 4
	script := fmt.Sprintf(`i=0
while [ $i -lt %d ]; do
	T0=$(date +%%s%%N) "$KV" "$DIR" lock --create job -- sh -c 'now=$(date +%%s%%N); echo "start $KV_FENCE_TOKEN $(( (now - T0) / 1000 ))" >> "$F"; sleep 0.002; echo "end $KV_FENCE_TOKEN" >> "$F"' || exit 1
	i=$((i+1))
done`, rounds)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, loops)
	for range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.Command("sh", "-c", script)
			c.Env = append(os.Environ(), "KV="+bin, "DIR="+dir, "F="+file)
			if out, err := c.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("loop: %v\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*loops*rounds {
		t.Fatalf("%d lines, want %d", len(lines), 2*loops*rounds)
	}
	var last int64
	var waits []time.Duration
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(s) != 3 || s[0] != "start" || len(e) != 2 || e[0] != "end" || e[1] != s[1] {
			t.Fatalf("lines %d-%d interleave: %q, %q", i+1, i+2, lines[i], lines[i+1])
		}
		tok, err := strconv.ParseInt(s[1], 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("line %d: token %q after %d", i+1, s[1], last)
		}
		last = tok
		us, _ := strconv.ParseInt(s[2], 10, 64)
		waits = append(waits, time.Duration(us)*time.Microsecond)
	}
	slices.Sort(waits)
	t.Logf("%d loops x %d sections in %v (%.1f ms a section): wait p50 %v, p90 %v, longest %v",
		loops, rounds, elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/float64(loops*rounds),
		waits[len(waits)/2].Round(time.Millisecond), waits[len(waits)*9/10].Round(time.Millisecond), waits[len(waits)-1].Round(time.Millisecond))
}
