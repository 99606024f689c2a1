package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/spf13/cobra"
)

type lockOpts struct {
	wait       time.Duration
	staleAfter time.Duration
	slots      int
	strategy   string
}

func newLockCmd(g *globalOpts) *cobra.Command {
	o := &lockOpts{}
	c := &cobra.Command{
		Use:   "lock DIR NAME [flags] -- COMMAND [ARGS]",
		Short: "Run a command while holding a lock, with a fencing token",
		Long: `lock takes lock NAME in the store in DIR (see "Locks" in the README), runs
COMMAND with KV_FENCE_TOKEN (the lock's fencing token, a decimal number
larger than any token handed out before), KV_LOCK_NAME, KV_LOCK_SLOT and
KV_LOCK_FD in its environment, releases the lock when COMMAND exits, and
exits with COMMAND's status (128+N if a signal N ended it). kv prints
nothing of its own on stdout.

The lock lives as long as COMMAND does: COMMAND inherits, as file
descriptor KV_LOCK_FD (3), the holder file on which kv keeps a kernel
lock, so the lock stays held even if kv itself is killed, and ends when
the last process holding that descriptor exits. SIGINT, SIGTERM, SIGHUP,
SIGQUIT, SIGUSR1 and SIGUSR2 sent to kv are passed on to COMMAND.

Without --wait, lock waits as long as it takes; with --wait D it gives up
after D and exits 75 (EX_TEMPFAIL); --wait 0 tries once. Write under the
lock with "kv DIR put|del|add ... --fence NAME:$KV_FENCE_TOKEN": a write
whose token is no longer the lock's exits 4 and writes nothing.
If the lock was taken over while COMMAND ran (possible under time-only,
or pid-first when kv is killed), a COMMAND that succeeded exits 5.

lock refuses a DIR that does not exist unless --create is given: a lock
taken in a mistyped directory would exclude no one.`,
		Example: `  kv data lock nightly -- ./backup.sh
  kv jobs lock --create nightly -- ./backup.sh       # a store of its own for the locks, made if missing
  kv data lock nightly --wait 30s -- sh -c 'kv data put state done --fence nightly:$KV_FENCE_TOKEN'
  kv data lock pool --slots 3 -- make -j4
  kv data lock job --strategy time-only --stale-after 1m -- ./job   # renewed every 20s while it runs`,
		Args: func(cmd *cobra.Command, a []string) error {
			if cmd.ArgsLenAtDash() != 2 || len(a) < 3 {
				return usagef("lock: want DIR NAME -- COMMAND [ARGS]\nUsage: kv %s", cmd.Use)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			return runLock(cmd, g, o, a[0], a[1], a[2:])
		},
	}
	f := c.Flags()
	f.DurationVar(&o.wait, "wait", -1, "give up after this long and exit 75 (default: wait as long as it takes; 0: try once)")
	lockFlags(f, &o.staleAfter, &o.slots, &o.strategy)
	g.storeFlags(c)
	g.createFlag(c)
	return c
}

type flagSet interface {
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
	IntVar(p *int, name string, value int, usage string)
	StringVar(p *string, name, value, usage string)
}

func lockFlags(f flagSet, stale *time.Duration, slots *int, strategy *string) {
	f.DurationVar(stale, "stale-after", 0, "judge a holder that has not renewed for this long dead (time-only; the fallback of kernel-first and pid-first)")
	f.IntVar(slots, "slots", 1, "a semaphore of N holders; every holder must give the same N")
	f.StringVar(strategy, "strategy", "kernel-first", "how holders are judged alive: kernel-first, pid-first, pid-only, time-only")
}

// lockerOptions builds the lock library's options from the flags.
func lockerOptions(g *globalOpts, stale time.Duration, slots int, strategy string) ([]filelock.Option, error) {
	st, err := filelock.ParseStrategy(strategy)
	if err != nil {
		return nil, usageError{err}
	}
	if st == filelock.TimeOnly && stale <= 0 {
		return nil, usagef("--strategy time-only needs --stale-after")
	}
	if g.sync != "" && g.sync != "always" {
		return nil, usagef("--sync %s: a lock's token is safe only when every write is durable before it is used (--sync always)", g.sync)
	}
	so := filelock.DefaultStoreOptions
	o, err := g.storeOptions(false)
	if err != nil {
		return nil, err
	}
	if g.segmentSize != "" {
		so.SegmentSize = o.SegmentSize
	}
	if g.checkpointBytes != "" {
		so.CheckpointBytes = o.CheckpointBytes
	}
	if o.FS != nil {
		so.FS = o.FS // a bug variant
	}
	return []filelock.Option{
		filelock.WithStrategy(st), filelock.WithStaleAfter(stale), filelock.WithSlots(slots), filelock.WithStoreOptions(so),
	}, nil
}

// forwarded are the signals kv passes on to the command it runs.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func runLock(cmd *cobra.Command, g *globalOpts, o *lockOpts, dir, name string, argv []string) error {
	if !g.create {
		// A lock taken in a mistyped directory would exclude no one.
		if err := requireStore(dir); err != nil {
			return err
		}
	}
	opts, err := lockerOptions(g, o.staleAfter, o.slots, o.strategy)
	if err != nil {
		return err
	}
	l, err := filelock.Open(dir, opts...)
	if err != nil {
		return err
	}
	// Signals that come while kv waits end the wait, as they would end
	// the command: kv leaves no wait key or holder file behind.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o.wait >= 0 {
		ctx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	var interrupted os.Signal
	go func() {
		select {
		case s := <-sigs:
			interrupted = s
			cancel()
		case <-ctx.Done():
		}
	}()
	var h *filelock.Holder
	if o.wait == 0 {
		h, err = l.TryAcquire(name)
	} else {
		h, err = l.Acquire(ctx, name)
	}
	cancel()
	if err != nil {
		switch {
		case interrupted != nil:
			return exitError{code: exitSignaled + int(interrupted.(syscall.Signal)), msg: fmt.Sprintf("lock %s: interrupted while waiting (%v)", name, interrupted)}
		case errors.Is(err, filelock.ErrLocked):
			return exitError{code: exitTempFail, msg: lockedMessage(err, o.wait)}
		}
		return err
	}
	code, runErr := runHeld(cmd, h, argv, sigs, o.staleAfter, l)
	rerr := h.Release()
	switch {
	case errors.Is(rerr, filelock.ErrLockLost):
		fmt.Fprintf(cmd.ErrOrStderr(), "kv: lock %s (token %d) was taken over while %s ran; its successor's lock is left alone\n", name, h.Token(), argv[0])
		if code == 0 {
			code = exitLockLost
		}
	case rerr != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "kv: lock %s: release: %v (the lock is free once no process holds its holder file)\n", name, rerr)
		if code == 0 {
			code = exitFailed
		}
	}
	if runErr != nil {
		return runErr
	}
	if code != 0 {
		return exitError{code: code}
	}
	return nil
}

func lockedMessage(err error, wait time.Duration) string {
	var le *filelock.LockedError
	if !errors.As(err, &le) {
		return err.Error()
	}
	if wait == 0 {
		return trimFilelock(le.Error())
	}
	return fmt.Sprintf("gave up after --wait %v: %s", wait, trimFilelock(le.Error()))
}

func trimFilelock(s string) string {
	if len(s) > 10 && s[:10] == "filelock: " {
		return s[10:]
	}
	return s
}

// runHeld runs argv while h is held and returns its exit code.
func runHeld(cmd *cobra.Command, h *filelock.Holder, argv []string, sigs chan os.Signal, stale time.Duration, l *filelock.Locker) (int, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin = cmd.InOrStdin()
	c.Stdout = cmd.OutOrStdout()
	c.Stderr = cmd.ErrOrStderr()
	c.Env = append(os.Environ(),
		"KV_FENCE_TOKEN="+strconv.FormatInt(h.Token(), 10),
		"KV_LOCK_NAME="+h.Name(),
		"KV_LOCK_SLOT="+strconv.Itoa(h.Slot()),
	)
	if f := h.File(); f != nil {
		c.ExtraFiles = []*os.File{f}
		c.Env = append(c.Env, "KV_LOCK_FD=3")
	}
	if err := c.Start(); err != nil {
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "kv: %v\n", err)
		return code, nil
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				c.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	if stale > 0 {
		// Renew the marker while the command runs, so that a judge that
		// goes by time finds the holder fresh; if kv dies, the renewals
		// stop and the lock goes stale after the window.
		go func() {
			t := time.NewTicker(stale / 3)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					ctx, cancel := context.WithTimeout(context.Background(), stale/3)
					err := h.Extend(ctx)
					cancel()
					if errors.Is(err, filelock.ErrLockLost) {
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	err := c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return exitFailed, err
	}
	return 0, nil
}
