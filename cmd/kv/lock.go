package main

import (
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/internal/kvcli"
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
		Long: `lock takes lock NAME in the store in DIR (see docs/locks.md), runs
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
	o.wait = -1
	f.Var((*foreverDuration)(&o.wait), "wait", "give up after this long and exit 75 (without it: wait as long as it takes; 0: try once)")
	lockFlags(f, &o.staleAfter, &o.slots, &o.strategy)
	// No store flags (--segment-size, --sync, ...): the lock library
	// opens its store with options of its own (lockerOptions).
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
// busy bounds each wait for the store's writer lock
// (filelock.WithBusyTimeout; negative: as long as the context allows).
//
// The store is opened with filelock.DefaultStoreOptions, which suit a
// small store opened for every operation, and --sync always, without
// which a token could be handed out twice: lock and locks take none of
// the store flags of the commands that write keys.
func lockerOptions(g *globalOpts, stale time.Duration, slots int, strategy string, busy time.Duration) ([]filelock.Option, error) {
	st, err := filelock.ParseStrategy(strategy)
	if err != nil {
		return nil, usageError{err}
	}
	if st == filelock.TimeOnly && stale <= 0 {
		return nil, usagef("--strategy time-only needs --stale-after")
	}
	so := filelock.DefaultStoreOptions
	o, err := g.storeOptions(false)
	if err != nil {
		return nil, err
	}
	if o.FS != nil {
		so.FS = o.FS // a bug variant
	}
	return []filelock.Option{
		filelock.WithStrategy(st), filelock.WithStaleAfter(stale), filelock.WithSlots(slots), filelock.WithStoreOptions(so),
		filelock.WithBusyTimeout(busy),
	}, nil
}

func runLock(cmd *cobra.Command, g *globalOpts, o *lockOpts, dir, name string, argv []string) error {
	if !g.create {
		// A lock taken in a mistyped directory would exclude no one.
		if err := requireStore(dir); err != nil {
			return err
		}
	}
	// The lock's own --wait bounds the whole run, the store's busy
	// writers included: each open waits for the writer lock as long as
	// that allows, and the release at the end as long as it takes.
	opts, err := lockerOptions(g, o.staleAfter, o.slots, o.strategy, -1)
	if err != nil {
		return err
	}
	l, err := filelock.Open(dir, opts...)
	if err != nil {
		return err
	}
	return kvcli.RunLocked(kvcli.Stdio{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()},
		l, name, argv, kvcli.LockOptions{Wait: o.wait, StaleAfter: o.staleAfter})
}
