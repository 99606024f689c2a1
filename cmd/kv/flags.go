package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

// defaultInterval is the sync period of --sync interval.
const defaultInterval = 100 * time.Millisecond

// globalOpts holds the flags about opening a store. Each command that
// opens one registers those it uses (storeFlags, createFlag, waitFlag);
// --bug is on every command, hidden.
type globalOpts struct {
	segmentSize     string
	checkpointBytes string
	maxValueSize    string
	sync            string
	bug             string
	noPreallocate   bool
	create          bool
	wait            time.Duration
	// fs is the file system to open the store through; nil: vfs.OS.
	fs vfs.FS
	// stderr is where the progress of a long recovery goes, when it is a
	// terminal.
	stderr io.Writer
	// openedWriter is set once the command opened a store as a writer:
	// an open that may have sealed or rotated the log, so that damage
	// found after it cannot be reported as "nothing was changed". Shared
	// by every copy of the options (withProgress).
	openedWriter *bool
}

// withProgress returns a copy of g that opens a store in dir through a
// file system that counts what it reads, and the progress report that
// shows it (nil, and g itself, when stderr is not a terminal): the
// progress of a long recovery.
func (g *globalOpts) withProgress(stderr io.Writer, dir, label string) (*globalOpts, *progress) {
	fsys, p := readProgress(stderr, g.baseFS(), dir, label)
	if p == nil {
		return g, nil
	}
	c := *g
	c.fs = fsys
	return &c, p
}

func (g *globalOpts) baseFS() vfs.FS {
	if g.fs == nil {
		return vfs.OS
	}
	return g.fs
}

// storeFlags adds the flags that shape a store's files and its
// acknowledgements, for the commands that write.
func (g *globalOpts) storeFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&g.segmentSize, "segment-size", "", "seal a log segment past this size (such as 4096, 4k, 64MiB or 64MB; at least 1KiB; default 64MiB)")
	f.StringVar(&g.checkpointBytes, "checkpoint-bytes", "", "checkpoint after this much log since the last snapshot (a size as --segment-size, or never; default 64MiB)")
	f.StringVar(&g.sync, "sync", "always", "when writes are acknowledged: always (after fdatasync), interval, never")
	f.BoolVar(&g.noPreallocate, "no-preallocate", false, "reserve no log space ahead of the records (by default up to 1MiB, at most half the free space)")
}

// maxValueFlag is the most --max-value-size allows: a put of a value
// that size, with a key of the largest size, is one log record that fits
// wal.DefaultMaxRecordSize (16 MiB), so that every later open with the
// default options (get, dump, watch, without the flag) reads it back.
const maxValueFlag = 15 << 20

// valueSizeFlag adds --max-value-size, for the commands that write
// values given by the user (put, load).
func (g *globalOpts) valueSizeFlag(c *cobra.Command) {
	c.Flags().StringVar(&g.maxValueSize, "max-value-size", "", "refuse values over this size (a size as --segment-size, at most 15MiB; default 4MiB)")
}

// tooLarge adds to a value refused as too large how to raise the limit;
// any other error is returned as it is.
func tooLarge(err error) error {
	if err == nil || !errors.Is(err, kv.ErrTooLarge) || !strings.Contains(err.Error(), "value of ") {
		return err
	}
	return fmt.Errorf("%w (--max-value-size SIZE raises the limit, up to 15MiB)", err)
}

// createFlag adds --create, for put, add and lock.
func (g *globalOpts) createFlag(c *cobra.Command) {
	c.Flags().BoolVar(&g.create, "create", false, "create the data directory if it does not exist (else a mistyped DIR is an error)")
}

// defaultWait is how long a command that writes waits, by default, for
// another process to close the store: a busy timeout, as SQLite's
// wrappers set one, of seconds rather than none. A one-shot writer beside
// other one-shot writers (a lock's waiters, a loop of puts) then waits
// its turn, which takes milliseconds, instead of failing; one beside a
// long-running writer fails with exit 75 after it.
const defaultWait = 10 * time.Second

// waitNotice is how long a wait for the writer's lock lasts before a
// command says on a terminal that it is waiting.
const waitNotice = time.Second

// waitFlag adds --wait, for the commands that need the writer's lock.
func (g *globalOpts) waitFlag(c *cobra.Command) {
	c.Flags().DurationVar(&g.wait, "wait", defaultWait, "wait up to this long for another process to close the store, then exit 75 (0: exit 75 at once)")
}

// foreverDuration is a duration flag whose negative value, its default,
// means "no limit": its help shows no default, where a DurationVar's
// would show a meaningless "(default -1ns)".
type foreverDuration time.Duration

// String implements pflag.Value: "" for no limit, so that help shows no
// default.
func (d *foreverDuration) String() string {
	if *d < 0 {
		return ""
	}
	return time.Duration(*d).String()
}

// Set implements pflag.Value.
func (d *foreverDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("%v is negative", v)
	}
	*d = foreverDuration(v)
	return nil
}

// Type implements pflag.Value.
func (d *foreverDuration) Type() string { return "duration" }

// Bounds of the size flags: a segment or a checkpoint threshold below
// minSize holds a record or two and is a mistake, not a setting.
const (
	minSize = 1 << 10
	maxSize = 1 << 40
)

// sizeRE is compiled on first use: a regexp compiled at package init
// costs every run of the command, most of which parse no size.
var sizeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+) ?([A-Za-z]*)$`) })

// sizeUnits are the units of parseSize, lower-cased: K, KiB and k are
// 1024, KB is 1000 (as dd reads them), and so on up.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// parseSize reads a byte count such as 4096, 4k, 64KiB, 64MiB or 64MB,
// between minSize and maxSize; "" is 0, the store's default.
func parseSize(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	m := sizeRE().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, usagef("--%s: %q is not a size (such as 4096, 4k, 64MiB or 64MB)", flag, s)
	}
	unit, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, usagef("--%s: %q: unknown unit %q (B, k or KiB, KB, M or MiB, MB, G or GiB, GB, T or TiB, TB)", flag, s, m[2])
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, usagef("--%s: %q is too large", flag, s)
	}
	switch n *= unit; {
	case n < minSize:
		return 0, usagef("--%s: %q is %d bytes, below the least of 1KiB", flag, s, n)
	case n > maxSize:
		return 0, usagef("--%s: %q is more than the most of 1TiB", flag, s)
	}
	return n, nil
}

// storeOptions builds the store's options from the flags.
func (g *globalOpts) storeOptions(readOnly bool) (*kv.Options, error) {
	o := &kv.Options{ReadOnly: readOnly, NoPreallocate: g.noPreallocate}
	var err error
	if o.SegmentSize, err = parseSize("segment-size", g.segmentSize); err != nil {
		return nil, err
	}
	mv, err := parseSize("max-value-size", g.maxValueSize)
	if err != nil {
		return nil, err
	}
	if mv > maxValueFlag {
		return nil, usagef("--max-value-size: %q is more than the most of 15MiB (a larger value would be a log record that a store opened with the default options refuses)", g.maxValueSize)
	}
	o.MaxValueSize = int(mv)
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
	o.FS = g.fs
	if bug != variant.None {
		// The bug variant rides on the store's file system (see
		// internal/variant).
		o.FS = variant.Wrap(g.baseFS(), bug)
	}
	return o, nil
}

// openWrite opens the store in dir for a command that writes: it needs
// the writer's lock, waiting up to --wait for it, and creates a missing
// directory only when create is true. On a terminal, a recovery that
// lasts shows its progress (withProgress), as openRead's does.
func (g *globalOpts) openWrite(ctx context.Context, dir string, create bool) (*kv.Store, error) {
	g, p := g.withProgress(g.stderr, dir, "recovery")
	defer p.done()
	opts, err := g.storeOptions(false)
	if err != nil {
		return nil, err
	}
	if !create {
		if err := requireStore(dir); err != nil {
			return nil, err
		}
		// The store's own check, under its lock: no store is made here.
		opts.NoCreate = true
	}
	if g.wait > 0 {
		opts.WaitForLock = true
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.wait)
		defer cancel()
		if isTerminal(g.stderr) {
			// A wait of a moment says nothing; a longer one says what
			// it waits for.
			t := time.AfterFunc(waitNotice, func() {
				fmt.Fprintf(g.stderr, "kv: %s is locked by another process: waiting up to %v (--wait 0: exit 75 at once)\n", dir, g.wait)
			})
			defer t.Stop()
		}
	}
	s, err := kv.OpenContext(ctx, dir, opts)
	if errors.Is(err, kv.ErrLocked) {
		return nil, lockedError(err, g.wait)
	}
	if err == nil {
		*g.openedWriter = true
	}
	return s, err
}

// lockedError words a store that another process holds, with exit 75
// (EX_TEMPFAIL): try again later.
func lockedError(err error, wait time.Duration) error {
	var le *kv.LockedError
	msg := trimKV(err)
	if errors.As(err, &le) {
		msg = trimKV(le)
	}
	if wait > 0 {
		return exitError{code: exitTempFail, msg: fmt.Sprintf("gave up after --wait %v: %s", wait, msg)}
	}
	return exitError{code: exitTempFail, msg: msg + " (--wait DURATION waits for it)"}
}

// openRead opens dir for a read command, by the rule of every read
// command (see the root command's help): it never waits for the writer's
// lock, and never fails because another process holds it.
//
// With asWriter (kv DIR dump) it opens the store as a writer does, so
// that its caller can checkpoint as the article's recovery does; beside a
// live writer, read-only. Otherwise (get, scan, backup, verify, lease
// list, dump --read-only) it opens read-only and changes no byte: beside
// a live writer it reads what that writer has marked durable; with no
// live writer it shows every record, vouching for a dead writer's last
// ones itself (kv.Options.ReadOnly). Records it could not vouch for are
// left out, and said so on stderr (unvouchedNote).
func (g *globalOpts) openRead(dir string, asWriter bool) (*kv.Store, error) {
	g, p := g.withProgress(g.stderr, dir, "recovery")
	defer p.done()
	opts, err := g.storeOptions(true)
	if err != nil {
		return nil, err
	}
	if err := requireStore(dir); err != nil {
		return nil, err
	}
	if !asWriter {
		s, err := kv.Open(dir, opts)
		if err == nil {
			unvouchedNote(g.stderr, dir, s)
		}
		return s, err
	}
	w := *opts
	w.ReadOnly, w.NoCreate = false, true
	// The dump reads every key: its open checks the whole image first,
	// so that damage in it stops the dump before the open changes a file.
	w.VerifyImage = true
	s, err := kv.Open(dir, &w)
	switch {
	case err == nil:
		*g.openedWriter = true
		return s, nil
	case errors.Is(err, kv.ErrLocked), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		// A writer has the store open, or the directory cannot be
		// written: read what is durable.
		s, err := kv.Open(dir, opts)
		if err == nil {
			unvouchedNote(g.stderr, dir, s)
		}
		return s, err
	}
	return nil, err
}

// unvouchedNote says on stderr, for a read-only open with no live writer
// beside it, how many records it left out because it could not vouch
// for them, after which revision, why, and how to see them. Beside a
// live writer it says nothing: those are the writer's last group, which
// it marks durable a moment later.
func unvouchedNote(stderr io.Writer, dir string, s *kv.Store) {
	st := s.Stats()
	if st.RecoveryUnvouched == 0 || st.RecoveryWriter != 0 {
		return
	}
	are, they, them := "are", "they", "them"
	if st.RecoveryUnvouched == 1 {
		are, they, them = "is", "it", "it"
	}
	fmt.Fprintf(stderr, "kv: %s: %s after revision %d %s left out: %s may not be durable (%s); "+
		"\"kv %s dump\" recovers %s as a writer does, writing %s again and syncing %s\n",
		dir, kvcli.Plural(int64(st.RecoveryUnvouched), "record"), st.Revision, are, they, st.RecoveryUnvouchedWhy, dir, them, them, them)
}

// requireDir refuses a data directory that does not exist.
func requireDir(dir string) error {
	fi, err := vfs.OS.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such data directory (load creates one, and put, add and lock with --create)", dir)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	return nil
}

// requireStore refuses a directory that holds no store: one that does
// not exist (requireDir), one that is empty, and one that holds other
// files (recovery.Identify's error, "not a kv data directory"), so that a
// command that does not create a store says so before it opens anything.
func requireStore(dir string) error {
	if err := requireDir(dir); err != nil {
		return err
	}
	kind, err := recovery.Identify(vfs.OS, dir)
	if err != nil && !recovery.IsCorrupt(err) {
		return err
	}
	if err == nil && !kind.HoldsStore() {
		return fmt.Errorf("no kv store in %s: the directory is empty (load creates one, and put, add and lock with --create)", dir)
	}
	return nil
}
