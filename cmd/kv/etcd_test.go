package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEtcdNotInstalled: kv --etcd without kv-etcd says how to install it
// and exits 2, whatever the verb; kv DIR export --to-etcd too.
func TestEtcdNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, args := range [][]string{
		{"--etcd", "127.0.0.1:2379", "get", "k"},
		{"--etcd=127.0.0.1:2379", "dump"},
		{"data", "export", "--to-etcd", "127.0.0.1:2379"},
	} {
		var out, errb bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errb)
		if code != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), etcdInstall) {
			t.Errorf("kv %q: exit %d, stdout %q, stderr %q; want exit %d and the install line", args, code, out.String(), errb.String(), exitUsage)
		}
	}
}

// TestEtcdRunsKVEtcd: kv --etcd runs the kv-etcd it finds in PATH with
// the whole command line, passing on its output and exit code; a "--etcd"
// after "--" (the command of lock) is not kv's.
func TestEtcdRunsKVEtcd(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"$@\"\ncat\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, etcdBin), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errb bytes.Buffer
	code := run([]string{"--etcd", "e1:2379", "add", "c", "-5"}, strings.NewReader("in\n"), &out, &errb)
	if code != 7 {
		t.Errorf("exit %d, want 7 (stderr %q)", code, errb.String())
	}
	if d := cmp.Diff("--etcd e1:2379 add c -5\nin\n", out.String()); d != "" {
		t.Errorf("kv-etcd's stdout (-want +got):\n%s", d)
	}
	if wantsEtcd([]string{"data", "lock", "n", "--", "kv", "--etcd", "e", "get", "k"}) {
		t.Errorf("a --etcd in lock's command counted as kv's")
	}
}
