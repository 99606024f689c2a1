package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

func newGetCmd(g *globals) *cobra.Command {
	var asJSON, raw bool
	c := &cobra.Command{
		Use:   "get KEY",
		Short: "Print the value of a key",
		Long: `get prints the value of KEY and a newline; with --raw its bytes exactly.
A missing key exits 7 (as grep exits 1 on no match). The read is linearizable: it sees
every write acknowledged before it began.`,
		Example: `  kv --etcd $ETCD get k1
  kv --etcd $ETCD get k1 --json | jq -r .value`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if raw && asJSON {
				return kvcli.Usagef("get: --raw and --json do not go together")
			}
			key, err := kvcli.ParseArg("key", a[0])
			if err != nil {
				return err
			}
			_, db, err := g.client()
			if err != nil {
				return err
			}
			defer db.Client().Close()
			ctx, cancel := g.ctx()
			defer cancel()
			e, err := db.Get(ctx, key)
			if err != nil {
				return kvcli.KeyError(key, g.describe(err))
			}
			return kvcli.PrintGet(cmd.OutOrStdout(), e, asJSON, raw)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print the key as a JSON object with its revisions (see "kv help json")`)
	c.Flags().BoolVar(&raw, "raw", false, "print the value's bytes exactly, without a newline")
	return c
}

// fenceFlag is --fence NAME:TOKEN on put, del and add.
type fenceFlag struct{ spec string }

func (f *fenceFlag) add(c *cobra.Command) {
	c.Flags().StringVar(&f.spec, "fence", "", "commit only while lock NAME is held with TOKEN (NAME:TOKEN, such as job:$KV_FENCE_TOKEN); else exit 4")
}

// fence returns the fence of --fence on db, or nil without it.
func (f *fenceFlag) fence(ctx context.Context, db kvapi.KV) (*kv.Fence, error) {
	if f.spec == "" {
		return nil, nil
	}
	name, token, err := kvcli.ParseFence(f.spec)
	if err != nil {
		return nil, err
	}
	return kvcli.FenceFor(ctx, db, name, token)
}

// kvWriter is what put, del and add write through.
type kvWriter interface {
	Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error)
	Put(ctx context.Context, key, value []byte) (kv.Revision, error)
	Delete(ctx context.Context, key []byte) (kv.Revision, error)
	Add(ctx context.Context, key []byte, delta int64) (int64, kv.Revision, error)
}

// writer returns the KV's writer, under the fence if there is one.
func writer(db kvapi.KV, fence *kv.Fence) kvWriter {
	if fence == nil {
		return plain{db}
	}
	return kvapi.Fenced(db, *fence)
}

// plain writes with kvapi's helpers, under no fence.
type plain struct{ db kvapi.KV }

func (p plain) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) { return p.db.Txn(ctx, t) }
func (p plain) Put(ctx context.Context, key, value []byte) (kv.Revision, error) {
	return kvapi.Put(ctx, p.db, key, value)
}
func (p plain) Delete(ctx context.Context, key []byte) (kv.Revision, error) {
	return kvapi.Delete(ctx, p.db, key)
}
func (p plain) Add(ctx context.Context, key []byte, delta int64) (int64, kv.Revision, error) {
	return kvapi.Add(ctx, p.db, key, delta)
}

func newPutCmd(g *globals) *cobra.Command {
	var asJSON bool
	var file, ttl string
	var lease uint64
	var fence fenceFlag
	c := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Set a key and print the revision",
		Long: `put sets KEY to VALUE and prints "revision N" once a majority of the
members has it. A VALUE of - is read from stdin; --file F reads it from F.
--ttl D binds the key to a new etcd lease of TTL D (whole seconds, rounded
up): the key is deleted at the lease's deadline, which put prints; --lease
ID binds it to an existing lease.`,
		Example: `  kv --etcd $ETCD put k1 v1
  kv --etcd $ETCD put config - < config.yaml
  kv --etcd $ETCD put state done --fence nightly:$KV_FENCE_TOKEN
  kv --etcd $ETCD put session/42 alice --ttl 30m`,
		Args: func(cmd *cobra.Command, a []string) error {
			if file != "" {
				if len(a) != 1 {
					return kvcli.Usagef("put: with --file, want KEY\nUsage: %s", cmd.UseLine())
				}
				return nil
			}
			return args(2, 2)(cmd, a)
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := kvcli.ParseArg("key", a[0])
			if err != nil {
				return err
			}
			var val []byte
			switch {
			case file != "":
				val, err = os.ReadFile(file)
			case a[1] == "-":
				val, err = io.ReadAll(cmd.InOrStdin())
			default:
				val, err = kvcli.ParseArg("value", a[1])
			}
			if err != nil {
				return err
			}
			if ttl != "" && lease != 0 {
				return kvcli.Usagef("--ttl and --lease: give one")
			}
			var d time.Duration
			if ttl != "" {
				if d, err = time.ParseDuration(ttl); err != nil || d <= 0 || d > kv.MaxLeaseTTL {
					return kvcli.Usagef("--ttl %q: want a duration above 0 and at most %v, such as 30s", ttl, kv.MaxLeaseTTL)
				}
			}
			cli, db, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			f, err := fence.fence(ctx, db)
			if err != nil {
				return g.describe(err)
			}
			if ttl == "" && lease == 0 {
				rev, err := writer(db, f).Put(ctx, key, val)
				if err != nil {
					return kvcli.FencedError(g.describe(err), fence.spec)
				}
				return kvcli.PrintPut(cmd.OutOrStdout(), key, rev, nil, asJSON)
			}
			pl := &kvcli.PutLease{ID: kv.LeaseID(lease)}
			if ttl != "" {
				info, err := db.Grant(ctx, d)
				if err != nil {
					return g.describe(err)
				}
				pl.ID, pl.Deadline = info.ID, info.Deadline
			} else {
				// The deadline of an existing lease: its time to live now.
				sent := time.Now()
				resp, err := cli.TimeToLive(ctx, clientv3.LeaseID(lease))
				if err != nil {
					return g.describe(err)
				}
				if resp.TTL < 0 {
					return fmt.Errorf("%w", &kv.LeaseError{ID: kv.LeaseID(lease)})
				}
				pl.Deadline = sent.Add(time.Duration(resp.TTL) * time.Second)
			}
			res, err := writer(db, f).Txn(ctx, kv.Txn{Then: []kv.Op{kv.PutOp(key, val).WithLease(pl.ID)}})
			if err != nil {
				if ttl != "" {
					db.Revoke(ctx, pl.ID) // the lease granted for nothing
				}
				return kvcli.FencedError(g.describe(err), fence.spec)
			}
			return kvcli.PrintPut(cmd.OutOrStdout(), key, res.Revision, pl, asJSON)
		},
	}
	c.Flags().StringVar(&file, "file", "", "read the value from this file")
	c.Flags().BoolVar(&asJSON, "json", false, `print the result as a JSON object (see "kv help json")`)
	c.Flags().StringVar(&ttl, "ttl", "", "bind the key to a new lease of this TTL (such as 30s): it is deleted at the lease's deadline")
	c.Flags().Uint64Var(&lease, "lease", 0, "bind the key to lease ID: it is deleted when the lease ends")
	fence.add(c)
	return c
}

func newDelCmd(g *globals) *cobra.Command {
	var asJSON bool
	var fence fenceFlag
	c := &cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a key and print how many keys were deleted",
		Long: `del removes KEY and prints "deleted 1, revision N". A missing key is not
an error: del prints "deleted 0", exits 0 and commits nothing.`,
		Example: `  kv --etcd $ETCD del k3
  kv --etcd $ETCD del k3 --json | jq .deleted`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := kvcli.ParseArg("key", a[0])
			if err != nil {
				return err
			}
			cli, db, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			f, err := fence.fence(ctx, db)
			if err != nil {
				return g.describe(err)
			}
			deleted := true
			rev, err := writer(db, f).Delete(ctx, key)
			if errors.Is(err, kv.ErrNotFound) {
				// The cluster's revision, as the store's for a key not there.
				deleted = false
				_, rev, err = db.Range(ctx, key, append(key, 0), 1)
			}
			if err != nil {
				return kvcli.FencedError(g.describe(err), fence.spec)
			}
			return kvcli.PrintDel(cmd.OutOrStdout(), key, deleted, rev, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print the result as a JSON object (see "kv help json")`)
	fence.add(c)
	return c
}

func newAddCmd(g *globals) *cobra.Command {
	var asJSON bool
	var fence fenceFlag
	c := &cobra.Command{
		Use:   "add KEY N",
		Short: "Add N to a key's integer value and print the new value",
		Long: `add adds the signed integer N to KEY's value, a decimal int64 (a missing
key counts as 0), and prints the new value. etcd has no add: it is a
compare-and-swap on the key's revision, read again while another write
comes between, never sent again after an error whose outcome is unknown.`,
		Example: `  kv --etcd $ETCD add c 1
  kv --etcd $ETCD add balance -250`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := kvcli.ParseArg("key", a[0])
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(a[1], 10, 64)
			if err != nil {
				return kvcli.Usagef("add: %q is not a decimal int64", a[1])
			}
			cli, db, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			f, err := fence.fence(ctx, db)
			if err != nil {
				return g.describe(err)
			}
			v, rev, err := writer(db, f).Add(ctx, key, n)
			if err != nil {
				return kvcli.FencedError(kvcli.KeyError(key, g.describe(err)), fence.spec)
			}
			return kvcli.PrintAdd(cmd.OutOrStdout(), key, v, rev, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print the result as a JSON object (see "kv help json")`)
	fence.add(c)
	return c
}

// pageSize is how many keys scan, dump and export read per request.
const pageSize = 1000

// entries yields the keys of [start, end) (a nil end: no bound) page by
// page, every page at the revision of the first, so that they are one
// moment of the cluster, as a scan of the store is; a revision
// compacted meanwhile ends it with etcd's error.
func entries(ctx context.Context, cli *clientv3.Client, start, end []byte) iter.Seq2[kv.Entry, error] {
	return func(yield func(kv.Entry, error) bool) {
		for e, err := range pages(ctx, cli, start, end) {
			if err != nil {
				yield(kv.Entry{}, err)
				return
			}
			if !yield(kv.Entry{Key: e.Key, Value: e.Value, CreateRev: kv.Revision(e.CreateRevision),
				ModRev: kv.Revision(e.ModRevision), Version: e.Version}, nil) {
				return
			}
		}
	}
}

// etcdEntry is a key as etcd returns it.
type etcdEntry = mvccpb.KeyValue

// pages yields etcd's entries of [start, end), pageSize per request, at
// one revision.
func pages(ctx context.Context, cli *clientv3.Client, start, end []byte) iter.Seq2[*etcdEntry, error] {
	return func(yield func(*etcdEntry, error) bool) {
		if len(start) == 0 {
			start = []byte{0} // keys are never empty
		}
		var rev int64
		for {
			opts := []clientv3.OpOption{clientv3.WithLimit(pageSize), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
			if end == nil {
				opts = append(opts, clientv3.WithFromKey())
			} else {
				opts = append(opts, clientv3.WithRange(string(end)))
			}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			resp, err := cli.Get(ctx, string(start), opts...)
			if err != nil {
				yield(nil, err)
				return
			}
			rev = resp.Header.Revision
			for _, e := range resp.Kvs {
				if !yield(e, nil) {
					return
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				return
			}
			start = append(append([]byte(nil), resp.Kvs[len(resp.Kvs)-1].Key...), 0)
		}
	}
}

func newScanCmd(g *globals) *cobra.Command {
	o := &kvcli.ScanOptions{}
	c := &cobra.Command{
		Use:   "scan [PREFIX]",
		Short: "Print the keys of a prefix or a range, as dump does",
		Long: `scan prints the keys that start with PREFIX (every key without one), in
key order, one KEY=VALUE line each, as dump prints them; --from, --to,
--limit, --keys-only and --count as on a data directory. It reads one
moment of the cluster: page by page, every page at the revision of the
first.`,
		Example: `  kv --etcd $ETCD scan user/
  kv --etcd $ETCD scan --from k2 --to k5 --json`,
		Args: args(0, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			var prefix []byte
			if len(a) == 1 {
				var err error
				if prefix, err = kvcli.ParseArg("prefix", a[0]); err != nil {
					return err
				}
			}
			start, end, err := o.Range(prefix)
			if err != nil {
				return err
			}
			cli, _, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := g.ctx()
			defer cancel()
			return g.describeNil(o.Print(cmd.OutOrStdout(), entries(ctx, cli, start, end), start, end))
		},
	}
	kvcli.ScanFlags(c.Flags(), o)
	return c
}

// describeNil is describe for an error that may be nil.
func (g *globals) describeNil(err error) error {
	if err == nil {
		return nil
	}
	return g.describe(err)
}

func newDumpCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "dump",
		Short: "Print every key of the cluster",
		Long: `dump prints one KEY=VALUE line per key of the cluster, sorted by key
bytes, as on a data directory ("kv B load" reads the lines back), at one
revision of the cluster.`,
		Example: `  kv --etcd $ETCD dump
  kv --etcd $ETCD dump | kv copy load     # the cluster's keys into a store`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, a []string) error {
			cli, _, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			var rerr error
			all := func(yield func(kv.Entry) bool) {
				for e, err := range entries(context.Background(), cli, nil, nil) {
					if err != nil {
						rerr = err
						return
					}
					if !yield(e) {
						return
					}
				}
			}
			if err := kvcli.PrintEntries(cmd.OutOrStdout(), all, asJSON, nil); err != nil {
				return err
			}
			return g.describeNil(rerr)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print one JSON object per key, with its revisions (see "kv help json")`)
	return c
}

func newWatchCmd(g *globals) *cobra.Command {
	o := &kvcli.WatchOptions{}
	c := &cobra.Command{
		Use:   "watch [PREFIX]",
		Short: "Print the changes to keys under a prefix as they commit",
		Long: `watch prints every change committed to the keys under PREFIX (all keys
without one), one line each, in revision order, as on a data directory:
"REV put KEY=VALUE", "REV del KEY". It ends on Ctrl-C or SIGTERM (exit
0), after --count changes, or with an error. --from REV starts at
revision REV; a revision the cluster has compacted is gone (exit 1,
naming the oldest revision it can serve). A member that loses its
leader does not end it: it goes on from where it was.`,
		Example: `  kv --etcd $ETCD watch locks/
  kv --etcd $ETCD watch --from 120 --json`,
		Args: args(0, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			var prefix []byte
			if len(a) == 1 {
				var err error
				if prefix, err = kvcli.ParseArg("prefix", a[0]); err != nil {
					return err
				}
			}
			if err := o.Check(); err != nil {
				return err
			}
			cli, db, err := g.client()
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return kvcli.PrintWatch(ctx, cmd.OutOrStdout(), db.Watch(ctx, prefix, kv.Revision(o.From), &kvapi.WatchOptions{Prev: o.Prev}), o)
		},
	}
	o.Compacted = func(ce *kv.CompactedError) string {
		return fmt.Sprintf("revision %d is compacted; the oldest the cluster can serve is %d (kv --etcd ENDPOINTS dump prints the map; watch --from a revision after it)", ce.Requested, ce.Oldest)
	}
	kvcli.WatchFlags(c.Flags(), o)
	return c
}
