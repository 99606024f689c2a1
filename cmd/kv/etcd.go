package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// etcdBin is the command that runs kv's verbs on an etcd cluster: a
// binary of the etcd module (etcd/cmd/kv-etcd), so that kv, and every
// embedded user of the store, never downloads etcd's client and gRPC.
const etcdBin = "kv-etcd"

// etcdInstall is how to install etcdBin.
const etcdInstall = "go install github.com/kvstore/kv/etcd/cmd/kv-etcd@latest"

// wantsEtcd reports whether the command line is one for etcdBin: it has
// --etcd (kv --etcd ENDPOINTS VERB ...) or --to-etcd (kv DIR export
// --to-etcd ENDPOINTS) before any "--".
func wantsEtcd(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, f := range []string{"--etcd", "--to-etcd"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				return true
			}
		}
	}
	return false
}

// findEtcdBin returns the path of etcdBin: next to kv's own executable,
// else in PATH.
func findEtcdBin() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), etcdBin)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return exec.LookPath(etcdBin)
}

// runEtcd runs the command line on etcdBin and returns its exit code:
// kv replaces itself with it when its standard files are the process's,
// and otherwise (a test calling run) runs it as a child. Without
// etcdBin, it says how to install it (exit 2).
func runEtcd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	bin, err := findEtcdBin()
	if err != nil {
		fmt.Fprintf(stderr, "kv: --etcd and --to-etcd run %s, which is not installed (not next to kv, nor in PATH).\n"+
			"It is a module of its own, so that kv needs no etcd client: install it with\n  %s\n", etcdBin, etcdInstall)
		return exitUsage
	}
	if stdin == os.Stdin && stdout == os.Stdout && stderr == os.Stderr {
		// The same process, pid and signals: a Ctrl-C or a kill reaches
		// kv-etcd as it would reach kv.
		err := syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
		fmt.Fprintf(stderr, "kv: running %s: %v\n", bin, err)
		return exitFailed
	}
	c := exec.Command(bin, args...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	err = c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitSignaled + int(ws.Signal())
		}
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintf(stderr, "kv: running %s: %v\n", bin, err)
		return exitFailed
	}
	return 0
}
