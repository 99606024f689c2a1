package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/etcd/internal/cluster"
)

// TestReadmeSample runs etcd/README.md's sample of kv on a cluster (the
// block of "$ kv --etcd $ETCD" lines) on a new 3-member cluster, each
// line in sh with $ETCD its endpoints and kv in PATH, and compares its
// stdout and stderr with what the README shows.
func TestReadmeSample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	blocks := strings.Split(string(readme), "```")
	for i := 1; i < len(blocks); i += 2 {
		if strings.Contains(blocks[i], "$ kv --etcd $ETCD ") {
			block = blocks[i]
		}
	}
	if block == "" {
		t.Fatal(`README.md has no block of "$ kv --etcd $ETCD" lines`)
	}
	c := cluster.ForTest(t, memberBin)
	cwd := t.TempDir()
	env := append(os.Environ(), "ETCD="+strings.Join(c.Endpoints(), ","),
		"PATH="+filepath.Dir(kvBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	samples := 0
	var cmdLine string
	var want []string
	flush := func() {
		if cmdLine == "" {
			return
		}
		samples++
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sh := exec.CommandContext(ctx, "sh", "-c", cmdLine)
		sh.Dir, sh.Env = cwd, env
		var out bytes.Buffer
		sh.Stdout, sh.Stderr = &out, &out
		sh.Run() // the exit code shows in the output where the sample wants it
		if d := cmp.Diff(strings.Join(want, "\n"), strings.TrimSuffix(out.String(), "\n")); d != "" {
			t.Errorf("README sample %q: output (-README +now):\n%s", cmdLine, d)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n")[1:] {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			flush()
			cmdLine, want = cmd, nil
			continue
		}
		want = append(want, line)
	}
	flush()
	if samples < 5 {
		t.Errorf("ran %d samples, want at least 5", samples)
	}
}
