package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLockRecipeUnderContention (item 1 of issue 39): README's lock
// recipe, kv DIR lock job -- sh -c 'kv DIR put state done --fence
// job:$KV_FENCE_TOKEN', in 8 concurrent loops of 10 runs each: every run
// exits 0. Before writers waited their turn by default, the holder's put
// found the store's writer lock taken by a waiting kv lock's short-lived
// open, and 7 to 30 of 80 runs exited 75.
func TestLockRecipeUnderContention(t *testing.T) {
	bin := buildKV(t)
	dir := filepath.Join(t.TempDir(), "L")
	if out, err := exec.Command(bin, dir, "put", "--create", "init", "1").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const loops, runs = 8, 10
	var mu sync.Mutex
	codes := map[int]int{}
	var firstErr string
	var wg sync.WaitGroup
	for range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range runs {
				cmd := exec.Command(bin, dir, "lock", "job", "--",
					"sh", "-c", fmt.Sprintf("%s %s put state done --fence job:$KV_FENCE_TOKEN", bin, dir))
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					code = -1
				}
				mu.Lock()
				codes[code]++
				if code != 0 && firstErr == "" {
					firstErr = strings.TrimSpace(string(out))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if codes[0] != loops*runs {
		t.Fatalf("exit codes of %d runs: %v; the first failure: %s", loops*runs, codes, firstErr)
	}
}
