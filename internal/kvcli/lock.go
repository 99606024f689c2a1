package kvcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kvstore/kv/filelock"
)

// Stdio is where a command reads and writes.
type Stdio struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// LockOptions are lock's: --wait (below 0: as long as it takes; 0: try
// once), and StaleAfter, the time-only window whose third is the
// holder's renewal period (0: no renewal by kv).
type LockOptions struct {
	Wait       time.Duration
	StaleAfter time.Duration
}

// Forwarded are the signals kv passes on to the command it runs.
var Forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// RunLocked takes lock name of l, runs argv holding it with
// KV_FENCE_TOKEN, KV_LOCK_NAME, KV_LOCK_SLOT (and KV_LOCK_FD where the
// Locker keeps a holder file) in its environment, releases the lock, and
// returns the command's exit status as an ExitError (nil for 0): 75 when
// --wait ran out, 128+N when signal N came while it waited, 5 when the
// lock was taken over while a command that succeeded ran.
func RunLocked(io Stdio, l *filelock.Locker, name string, argv []string, o LockOptions) error {
	// Signals that come while kv waits end the wait, as they would end
	// the command: kv leaves no wait key or holder file behind.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, Forwarded...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o.Wait >= 0 {
		ctx, cancel = context.WithTimeout(ctx, o.Wait)
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
	var err error
	if o.Wait == 0 {
		h, err = l.TryAcquire(name)
	} else {
		h, err = l.Acquire(ctx, name)
	}
	cancel()
	if err != nil {
		switch {
		case interrupted != nil:
			return ExitError{Code: ExitSignaled + int(interrupted.(syscall.Signal)), Msg: fmt.Sprintf("lock %s: interrupted while waiting (%v)", name, interrupted)}
		case errors.Is(err, filelock.ErrLocked):
			return ExitError{Code: ExitTempFail, Msg: lockedMessage(err, o.Wait), Err: err}
		}
		return err
	}
	code, runErr := runHeld(io, h, argv, sigs, o.StaleAfter)
	rerr := h.Release()
	switch {
	case errors.Is(rerr, filelock.ErrLockLost):
		fmt.Fprintf(io.ErrOut, "kv: lock %s (token %d) was taken over while %s ran; its successor's lock is left alone\n", name, h.Token(), argv[0])
		if code == 0 {
			code = ExitLockLost
		}
	case rerr != nil:
		fmt.Fprintf(io.ErrOut, "kv: lock %s: release: %v (the lock is free once no process holds its holder file)\n", name, rerr)
		if code == 0 {
			code = ExitFailed
		}
	}
	if runErr != nil {
		return runErr
	}
	if code != 0 {
		return ExitError{Code: code}
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
func runHeld(io Stdio, h *filelock.Holder, argv []string, sigs chan os.Signal, stale time.Duration) (int, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin = io.In
	c.Stdout = io.Out
	c.Stderr = io.ErrOut
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
		code := ExitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		fmt.Fprintf(io.ErrOut, "kv: %v\n", err)
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
		return ExitFailed, err
	}
	return 0, nil
}
