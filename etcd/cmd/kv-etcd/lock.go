package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/kvstore/kv/etcd/etcdlock"
	"github.com/kvstore/kv/internal/kvcli"
)

func newLockCmd(g *globals) *cobra.Command {
	var wait, ttl time.Duration
	c := &cobra.Command{
		Use:   "lock NAME [flags] -- COMMAND [ARGS]",
		Short: "Run a command while holding a lock of the cluster, with a fencing token",
		Long: `lock takes lock NAME on the cluster (the lock library on etcd, etcdlock),
runs COMMAND with KV_FENCE_TOKEN (the lock's fencing token: the cluster
revision that created its key, larger than any token handed out before),
KV_LOCK_NAME and KV_LOCK_SLOT in its environment, releases the lock when
COMMAND exits, and exits with COMMAND's status, as on a data directory.

The lock lives as long as kv keeps its etcd lease (--ttl) alive: if kv is
killed, paused or cut off from the cluster for longer than the TTL, the
lock ends and another holder may take it; COMMAND's fenced writes ("kv
--etcd ENDPOINTS put ... --fence NAME:$KV_FENCE_TOKEN") then exit 4 and
write nothing. Without --wait lock waits as long as it takes; --wait D
gives up after D (exit 75); --wait 0 tries once.`,
		Example: `  kv --etcd $ETCD lock nightly -- ./backup.sh
  kv --etcd $ETCD lock nightly --wait 30s -- sh -c 'kv --etcd $ETCD put state done --fence nightly:$KV_FENCE_TOKEN'`,
		Args: func(cmd *cobra.Command, a []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(a) < 2 {
				return kvcli.Usagef("lock: want NAME -- COMMAND [ARGS]\nUsage: kv --etcd ENDPOINTS %s", cmd.Use)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			cli, _, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			l, err := etcdlock.NewLocker(cli, &etcdlock.Options{TTL: ttl})
			if err != nil {
				return err
			}
			defer l.Close() // revokes the lease
			return kvcli.RunLocked(kvcli.Stdio{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()},
				l, a[0], a[1:], kvcli.LockOptions{Wait: wait})
		},
	}
	c.Flags().DurationVar(&wait, "wait", -1, "give up after this long and exit 75 (default: wait as long as it takes; 0: try once)")
	c.Flags().DurationVar(&ttl, "ttl", etcdlock.DefaultTTL, "the lease that keeps the lock: how long it outlives kv killed, paused or cut off (whole seconds)")
	return c
}

func newLocksCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "locks [sweep]",
		Short: "List the holders of the cluster's locks, or sweep the dead ones",
		Long: `locks prints one line per holder of every lock kept on the cluster (see
"kv --etcd ENDPOINTS lock"), as on a data directory. On etcd a holder is
alive while its lease is: a dead holder's keys go with its lease, so
"locks sweep" has little to remove (waiters' keys whose lease ended).`,
		Example: `  kv --etcd $ETCD locks
  kv --etcd $ETCD locks --json | jq .token`,
		Args: args(0, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 && a[0] != "sweep" {
				return kvcli.Usagef("locks: %q is not sweep\nUsage: kv --etcd ENDPOINTS %s", a[0], cmd.Use)
			}
			cli, _, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			l, err := etcdlock.NewLocker(cli, nil)
			if err != nil {
				return err
			}
			defer l.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			w := cmd.OutOrStdout()
			if len(a) == 1 {
				removed, err := l.Sweep(ctx)
				if err != nil {
					return g.describe(err)
				}
				if asJSON {
					return kvcli.PrintLocksJSON(w, removed)
				}
				return kvcli.PrintSwept(w, removed)
			}
			infos, err := l.List(ctx)
			if err != nil {
				return g.describe(err)
			}
			if asJSON {
				return kvcli.PrintLocksJSON(w, infos)
			}
			return kvcli.PrintLocks(w, infos)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print one JSON object per holder (see "kv help json")`)
	return c
}
