package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// etcdBin is the command that runs kv's verbs on an etcd cluster: a
// binary of the etcd module (etcd/cmd/kv-etcd), so that kv, and every
// embedded user of the store, never downloads etcd's client and gRPC.
const etcdBin = "kv-etcd"

// etcdInstall is how to install etcdBin from a clone of kv's repository:
// the etcd module is not published, and its go.mod replaces kv with the
// clone's own ("go install ...@latest" refuses a module with a replace).
const etcdInstall = "cd etcd && go install ./cmd/kv-etcd    # in a clone of kv's repository, next to kv's own go install"

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

// probeTimeout bounds the dial of each endpoint by etcdReachable.
const probeTimeout = 500 * time.Millisecond

// etcdReachable dials each endpoint of --etcd or --to-etcd once, over
// TCP, and returns an error when every one refuses the connection: no
// server listens there, which kv-etcd's client would otherwise retry
// for the whole --command-timeout. Any other outcome (a connection, a
// name that does not resolve, a timeout, a unix socket) is left to
// kv-etcd, which says it better; so is a command line asking for help.
func etcdReachable(args []string) error {
	var eps []string
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		a := args[i]
		if a == "--help" || a == "-h" || a == "help" {
			return nil
		}
		for _, f := range []string{"--etcd", "--to-etcd"} {
			switch {
			case a == f && i+1 < len(args):
				eps = append(eps, strings.Split(args[i+1], ",")...)
			case strings.HasPrefix(a, f+"="):
				eps = append(eps, strings.Split(a[len(f)+1:], ",")...)
			}
		}
	}
	var refused []string
	for _, ep := range eps {
		ep = strings.TrimSpace(ep)
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			if u.Scheme != "http" && u.Scheme != "https" {
				return nil
			}
			host = u.Host
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			return nil // no port: kv-etcd's to judge
		}
		c, err := net.DialTimeout("tcp", host, probeTimeout)
		if err == nil {
			c.Close()
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		refused = append(refused, ep)
	}
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("etcd %s: connection refused: no etcd server listens there (is it running? --etcd takes the client URLs, port 2379 by default)", strings.Join(refused, ","))
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
	if err := etcdReachable(args); err != nil {
		fmt.Fprintf(stderr, "kv: %v\n", err)
		return exitFailed
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
