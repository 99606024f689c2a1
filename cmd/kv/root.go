package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type pflagFlag = pflag.Flag

// defaultInterval is the sync period of --sync interval.
const defaultInterval = 100 * time.Millisecond

// version is set at build time with -ldflags "-X main.version=..."; the
// module version from the build info is used otherwise.
var version = ""

// globalOpts are the flags of every command that opens a store.
type globalOpts struct {
	segmentSize     string
	checkpointBytes string
	sync            string
	bug             string
	noPreallocate   bool
}

// usageError is a mistake in the command line: exitUsage and a hint.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run executes the command line args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "kv: internal error: %v (please report it)\n", r)
			code = exitInternal
		}
	}()
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(rewriteArgs(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	// The root command runs nothing: an error that ends there is cobra's
	// lookup of the command (an unknown one). Its flag errors and every
	// command's argument checks are usageErrors already (newRoot).
	var ue usageError
	if errors.As(err, &ue) || cmd == root {
		fmt.Fprintf(stderr, "kv: %s\nRun 'kv --help' for usage.\n", err)
		return exitUsage
	}
	var ex exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintf(stderr, "kv: %s\n", ex.msg)
		}
		return ex.code
	}
	fmt.Fprintf(stderr, "kv: %s\n", strings.TrimPrefix(describe(err), "kv: "))
	return exitFailed
}

// keyError words a failed operation on key.
func keyError(key []byte, err error) error {
	if errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("key %s not found", opmodel.Show(key))
	}
	return err
}

// exitError ends the command with a code, after it printed its own report.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// describe turns an error into the one line a user reads: for damage, the
// file and offset first.
func describe(err error) string {
	var ce *wal.CorruptError
	if errors.As(err, &ce) {
		loc := ce.File
		if ce.Offset >= 0 {
			loc = fmt.Sprintf("%s offset %d", ce.File, ce.Offset)
		}
		hint := ""
		if recovery.IsCorrupt(err) {
			hint = " (nothing was changed; 'kv DIR check' lists the damage, 'kv DIR repair' is the way out)"
		}
		return fmt.Sprintf("%s: %v: %s%s", loc, trimPrefix(ce.Err), ce.Reason, hint)
	}
	return err.Error()
}

func trimPrefix(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globalOpts{}
	root := &cobra.Command{
		Use:   "kv DIR COMMAND [ARGS]",
		Short: "An embedded, crash-safe key-value store: recover, inspect, verify and repair a data directory",
		Long: `kv works on a data directory of the kv store: write-ahead log segments
(log.000001, ...) and a snapshot. Every command that opens the directory
runs recovery first: it loads the snapshot, replays the log segments the
snapshot does not cover, and checkpoints if it replayed anything.

The directory may come before or after the command: "kv data dump" and
"kv dump data" are the same.

"The article" in the help of demo, crashsim and killtest is "Recovery
Code Must Survive a Crash Too" (Mehdi Akiki), whose store, 17-operation
workload, double-apply bug and crash checkers kv follows.`,
		Example: `  kv demo                       # the whole story on a temporary directory
  kv data load < ops.txt        # put/del/add lines from stdin
  kv data dump                  # recover and print every key
  kv data check                 # verify without changing anything`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.segmentSize, "segment-size", "", "seal a log segment past this size (bytes, or with KiB/MiB/GiB; default 64MiB)")
	pf.StringVar(&g.checkpointBytes, "checkpoint-bytes", "", "checkpoint after this much log since the last snapshot (default 64MiB; never: only on demand)")
	pf.StringVar(&g.sync, "sync", "always", "when writes are acknowledged: always (after fdatasync), interval, never")
	pf.BoolVar(&g.noPreallocate, "no-preallocate", false, "reserve no log space ahead of the records (by default up to 1MiB, at most half the free space)")
	pf.StringVar(&g.bug, "bug", "", "switch on a deliberate bug variant, for the crash tests")
	pf.MarkHidden("bug")
	root.AddCommand(
		newDumpCmd(g), newGetCmd(g), newPutCmd(g), newDelCmd(g), newAddCmd(g), newScanCmd(g),
		newLoadCmd(g), newCheckCmd(g), newLogCmd(g), newStatCmd(g), newCheckpointCmd(g),
		newRepairCmd(g), newDemoCmd(g), newCrashsimCmd(g),
		newKilltestCmd(g), newLockCmd(g), newLocksCmd(g), newWatchCmd(g), newLeaseCmd(g),
		newBackupCmd(g), newRestoreCmd(g), newVerifyCmd(g),
	)
	// Cobra adds its completion command when it executes; added now, its
	// argument checks become usage errors with everyone else's.
	root.InitDefaultCompletionCmd()
	usageArgs(root)
	return root
}

// usageArgs makes the argument check of c and of every command below it
// return a usageError (exit code 2), cobra's own checks included.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := check(cmd, a)
			var ue usageError
			if err != nil && !errors.As(err, &ue) {
				return usageError{err}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// rewriteArgs turns the article's spelling "kv DIR VERB args" into "kv
// VERB DIR args", which cobra can parse: when the first positional
// argument is not a command and the second is, they swap.
func rewriteArgs(root *cobra.Command, args []string) []string {
	valued := map[string]bool{}
	addFlags := func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflagFlag) {
			if f.NoOptDefVal == "" {
				valued["--"+f.Name] = true
				if f.Shorthand != "" {
					valued["-"+f.Shorthand] = true
				}
			}
		})
	}
	addFlags(root)
	root.PersistentFlags().VisitAll(func(f *pflagFlag) {
		if f.NoOptDefVal == "" {
			valued["--"+f.Name] = true
		}
	})
	for _, c := range root.Commands() {
		addFlags(c)
	}
	var pos []int
	for i := 0; i < len(args) && len(pos) < 2; i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if !strings.Contains(a, "=") && valued[a] {
				i++
			}
			continue
		}
		pos = append(pos, i)
	}
	if len(pos) < 2 || isCommand(root, args[pos[0]]) || !isCommand(root, args[pos[1]]) {
		return args
	}
	out := append([]string(nil), args...)
	out[pos[0]], out[pos[1]] = args[pos[1]], args[pos[0]]
	return out
}

func isCommand(root *cobra.Command, name string) bool {
	if name == "help" || name == "completion" {
		return true
	}
	for _, c := range root.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return true
		}
	}
	return false
}

// parseSize reads a byte count such as 4096, 64KiB or 1MiB.
func parseSize(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, usagef("--%s: %q is not a size in bytes (such as 4096 or 64MiB)", flag, s)
	}
	return n * mult, nil
}

// storeOptions builds the store's options from the global flags.
func (g *globalOpts) storeOptions(readOnly bool) (*kv.Options, error) {
	o := &kv.Options{ReadOnly: readOnly, NoPreallocate: g.noPreallocate}
	var err error
	if o.SegmentSize, err = parseSize("segment-size", g.segmentSize); err != nil {
		return nil, err
	}
	if g.checkpointBytes == "never" {
		o.CheckpointBytes = -1
	} else if o.CheckpointBytes, err = parseSize("checkpoint-bytes", g.checkpointBytes); err != nil {
		return nil, err
	}
	switch g.sync {
	case "", "always":
	case "never":
		o.Sync = kv.Never
	case "interval":
		o.Sync = kv.Interval(defaultInterval)
	default:
		return nil, usagef("--sync: %q is not one of always, interval, never", g.sync)
	}
	bug, err := variant.Parse(g.bug)
	if err != nil {
		return nil, usageError{err}
	}
	if bug != variant.None {
		// The bug variant rides on the store's file system (see
		// internal/variant).
		o.FS = variant.Wrap(vfs.OS, bug)
	}
	return o, nil
}

// open opens the store in dir. With mustExist, a missing directory is an
// error rather than a new empty store. A read-only open is openRead's.
func (g *globalOpts) open(dir string, mustExist, readOnly bool) (*kv.Store, error) {
	opts, err := g.storeOptions(readOnly)
	if err != nil {
		return nil, err
	}
	if mustExist {
		if err := requireDir(dir); err != nil {
			return nil, err
		}
	}
	if readOnly {
		return openRead(dir, opts)
	}
	return kv.Open(dir, opts)
}

// openRead opens dir for a read command. The rule for every read
// command: it reads what is durable, without the writer's lock, so that
// it never keeps a writer out. Beside a live writer it shows what that
// writer has marked durable (its acknowledged writes, a millisecond after
// it went idle). When the log ends in records that nothing marks durable
// and no writer is alive (a writer that crashed, or a power loss took its
// last mark), it recovers the directory first, as a writer's open does,
// so that those records are made durable and shown; it does not
// checkpoint.
func openRead(dir string, opts *kv.Options) (*kv.Store, error) {
	s, err := kv.Open(dir, opts)
	if err != nil || s.Stats().RecoveryUnvouched == 0 {
		return s, err
	}
	s.Close()
	w := *opts
	w.ReadOnly, w.CheckpointBytes = false, -1
	s, err = kv.Open(dir, &w)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, kv.ErrLocked), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		// A writer came back, or the directory cannot be written: read
		// what is durable.
		return kv.Open(dir, opts)
	}
	return nil, err
}

func requireDir(dir string) error {
	fi, err := vfs.OS.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such data directory (put and load create one)", dir)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	return nil
}

// args checks the number of positional arguments as a usage error.
func args(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < min || (max >= 0 && len(a) > max) {
			return usagef("%s: wrong number of arguments\nUsage: kv %s", cmd.Name(), cmd.Use)
		}
		return nil
	}
}
