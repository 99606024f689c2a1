// Command kv-etcd is the kv command on an etcd cluster: "kv --etcd
// ENDPOINTS VERB ..." runs it (kv finds it next to its own executable or
// in PATH), for get, put, del, add, scan, dump, watch, lock, locks and
// export. It is a binary of the etcd module (github.com/kvstore/kv/etcd)
// so that kv itself, and every embedded user of the store, never
// downloads etcd's client and gRPC:
//
//	cd etcd && go install ./cmd/kv-etcd    # from a clone of the repository
//
// It prints what kv prints on a data directory and exits with the same
// codes, through the same code (internal/kvcli) on kvapi.KV
// (etcdkv); TestSameOutput runs one table of invocations on a data
// directory and on a 3-member cluster and compares them.
//
// "kv DIR export --to-etcd ENDPOINTS" copies a store's keys to a
// cluster, and "kv --etcd ENDPOINTS export --to-dir DIR" back (see
// export.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/internal/kvcli"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// globals are the flags of every command.
type globals struct {
	endpoints      string
	dialTimeout    time.Duration
	commandTimeout time.Duration
	stderr         io.Writer
}

// run executes the command line args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "kv: internal error: %v (please report it)\n", r)
			code = kvcli.ExitInternal
		}
	}()
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(rewriteArgs(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ex kvcli.ExitError
	switch {
	case errors.As(err, new(kvcli.UsageError)) || cmd == root && !errors.As(err, &ex):
		fmt.Fprintf(stderr, "kv: %s\nRun 'kv --etcd ENDPOINTS --help' for usage.\n", kvcli.Trim(err))
		return kvcli.ExitUsage
	case errors.As(err, &ex):
		if ex.Msg != "" {
			fmt.Fprintf(stderr, "kv: %s\n", ex.Msg)
		}
		return ex.Code
	}
	fmt.Fprintf(stderr, "kv: %s\n", kvcli.Trim(err))
	return kvcli.ExitFailed
}

const rootLong = `kv --etcd ENDPOINTS works on an etcd cluster as kv works on a data
directory: the same commands print the same lines and JSON objects and
exit with the same codes (see "kv --help" and "kv help json"). Revisions,
and so lock tokens, are the cluster's own.

ENDPOINTS is a comma-separated list of the cluster's client URLs
(http://10.0.0.1:2379,http://10.0.0.2:2379 or 10.0.0.1:2379,...).

Every write returns once a majority of the members has it on disk. A
write whose answer is lost (a timeout, a leader change) may or may not
have committed: kv says so and exits 1; "get" tells.

Exit status: 0 success; 1 failure; 2 a mistake in the command line; 3 a
bug in kv; 4 a fenced write refused; 5 a lock taken over while its
command ran; 7 get: no such key; 75 "lock --wait" gave up; 128+N
interrupted by signal N (kv --help and docs/operations.md list them all).`

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stderr: stderr}
	root := &cobra.Command{
		Use:   "kv --etcd ENDPOINTS COMMAND [ARGS]",
		Short: "The kv command on an etcd cluster",
		Long:  rootLong,
		Example: `  kv --etcd 10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379 put k1 v1
  kv --etcd $ETCD get k1 --json
  kv --etcd $ETCD lock nightly -- ./backup.sh
  kv data export --to-etcd $ETCD         # copy a store's keys to the cluster`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return kvcli.UsageError{Err: err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "etcd", "", "the cluster's client endpoints, comma-separated")
	pf.DurationVar(&g.dialTimeout, "dial-timeout", 5*time.Second, "give up connecting to the cluster after this long")
	pf.DurationVar(&g.commandTimeout, "command-timeout", 10*time.Second, "give up on a request after this long (not on watch, nor on lock's wait or command)")
	root.AddCommand(newGetCmd(g), newPutCmd(g), newDelCmd(g), newAddCmd(g), newScanCmd(g), newDumpCmd(g),
		newWatchCmd(g), newLockCmd(g), newLocksCmd(g), newExportCmd(g))
	usageArgs(root)
	return root
}

// usageArgs makes every command's argument check a usage error.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := check(cmd, a); err != nil && !errors.As(err, new(kvcli.UsageError)) {
				return kvcli.UsageError{Err: err}
			} else {
				return err
			}
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// args checks the number of positional arguments as a usage error.
func args(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < min || (max >= 0 && len(a) > max) {
			return kvcli.Usagef("%s: wrong number of arguments\nUsage: %s", cmd.Name(), cmd.UseLine())
		}
		return nil
	}
}

// negative matches a negative number, which no flag looks like.
var negative = regexp.MustCompile(`^-[0-9]`)

// rewriteArgs makes the command line one cobra parses: "kv DIR export
// ..." (the data directory first, as kv spells it) becomes "export DIR
// ...", and a negative number among the positional arguments ("add c
// -5"), which cobra would take for a flag, moves them after a "--".
func rewriteArgs(root *cobra.Command, args []string) []string {
	valued := map[string]bool{}
	var walk func(c *cobra.Command)
	add := func(f *pflag.Flag) {
		if f.NoOptDefVal == "" {
			valued["--"+f.Name] = true
		}
	}
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	var pos []int
	end := len(args)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			end = i
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 && !negative.MatchString(a) {
			if !strings.Contains(a, "=") && valued[a] {
				i++
			}
			continue
		}
		pos = append(pos, i)
	}
	out := append([]string(nil), args...)
	if len(pos) >= 2 && out[pos[1]] == "export" && out[pos[0]] != "export" {
		out[pos[0]], out[pos[1]] = out[pos[1]], out[pos[0]]
	}
	if len(pos) < 2 || end < len(args) || out[pos[0]] == "lock" {
		return out
	}
	neg := false
	for _, i := range pos[1:] {
		neg = neg || negative.MatchString(out[i])
	}
	if !neg {
		return out
	}
	isPos := map[int]bool{}
	for _, i := range pos[1:] {
		isPos[i] = true
	}
	var flags, rest []string
	for i, a := range out {
		if isPos[i] {
			rest = append(rest, a)
		} else {
			flags = append(flags, a)
		}
	}
	return append(append(flags, "--"), rest...)
}

// client connects to the cluster of --etcd.
func (g *globals) client() (*clientv3.Client, *etcdkv.KV, error) {
	if g.endpoints == "" {
		return nil, nil, kvcli.Usagef("--etcd ENDPOINTS is missing (the cluster's client URLs, comma-separated)")
	}
	var eps []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: g.dialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("etcd %s: %w", g.endpoints, err)
	}
	return c, etcdkv.New(c, nil), nil
}

// ctx is the context of one request: --command-timeout.
func (g *globals) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), g.commandTimeout)
}

// describe words an error of the cluster: a request that timed out says
// which endpoints and how long.
func (g *globals) describe(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd %s: no answer within --command-timeout %v: %w", g.endpoints, g.commandTimeout, err)
	}
	return err
}
