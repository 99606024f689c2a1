package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// storeCommands are the commands that take the flags shaping a store's
// files and acknowledgements (--segment-size, --checkpoint-bytes,
// --sync, --no-preallocate): those that may write a store's keys. No
// other command shows them; lock and locks, whose lock store keeps the
// lock library's own options, neither.
var storeCommands = []string{"put", "del", "add", "load", "dump", "checkpoint", "lease", "restore"}

// TestHelpEveryCommand: every command has a description and examples,
// its help shows them, and the usage line of a command on a data
// directory is "kv DIR VERB" first; the store flags are on the commands
// that use them and on no other.
func TestHelpEveryCommand(t *testing.T) {
	root := newRoot(nil, nil, nil)
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || c.Hidden || c.Name() == "help" || !c.Runnable() && c.Name() == "json" {
			return
		}
		seen++
		path := strings.Fields(c.CommandPath())[1:]
		if c.Long == "" || c.Example == "" {
			t.Errorf("kv %s: Long %d bytes, Example %d bytes: want both", strings.Join(path, " "), len(c.Long), len(c.Example))
		}
		code, stdout, stderr := kvRun(t, "", append(path, "--help")...)
		if code != 0 || !strings.Contains(stdout, "Examples:\n") {
			t.Errorf("kv %s --help: exit %d, no examples:\n%s%s", strings.Join(path, " "), code, stdout, stderr)
		}
		if strings.HasPrefix(c.Use, c.Name()+" DIR") && c.Parent() == root {
			want := "Usage:\n  kv DIR " + c.Name()
			if !strings.Contains(stdout, want) {
				t.Errorf("kv %s --help: no %q:\n%s", c.Name(), want, stdout)
			}
		}
		wantStore := c.Parent() == root && slices.Contains(storeCommands, c.Name())
		for _, f := range []string{"segment-size", "checkpoint-bytes", "sync", "no-preallocate"} {
			if has := c.Flags().Lookup(f) != nil; has != wantStore {
				t.Errorf("kv %s: has --%s %v, want %v", strings.Join(path, " "), f, has, wantStore)
			}
		}
	}
	walk(root)
	if seen < 20 {
		t.Errorf("checked %d commands, want every one (20 or more)", seen)
	}
}

// TestVersion builds kv as a user does, with the build's VCS stamp, and
// checks that --version prints the module version and the commit it was
// built from. It is skipped where the build records no revision (go's
// VCS stamping needs the repository's .git directory; a git worktree's
// .git file is not one).
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kv")
	}
	gitOut, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("git rev-parse HEAD: %v: not in a git checkout", err)
	}
	head := strings.TrimSpace(string(gitOut))
	bin := filepath.Join(t.TempDir(), "kv")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), "vcs.revision=") {
		t.Skipf("the build recorded no VCS revision (a git worktree?):\n%s", info)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	line := string(out)
	if !strings.HasPrefix(line, "kv version v") || !strings.Contains(line, "github.com/kvstore/kv") || !strings.Contains(line, "revision "+head) {
		t.Errorf("kv --version = %q; want the module version (v...), the module path and revision %s", line, head)
	}
}
