package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/term"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
)

// batchBytes bounds the keys and values of one transaction of export,
// below etcd's default request limit (1.5 MiB) and the store's record
// limit.
const batchBytes = 1 << 20

type exportOpts struct {
	toEtcd, toDir string
	overwrite     bool
	batch         int
}

const exportLong = `export copies every key of a data directory to an etcd cluster ("kv DIR
export --to-etcd ENDPOINTS"), or of a cluster to a data directory ("kv
--etcd ENDPOINTS export --to-dir DIR", which creates DIR if it is
missing). It reads one moment of the source, and writes it batch by batch
(--batch keys, at most 1 MiB, per transaction), showing its progress on a
terminal. Each batch is one transaction: a batch is written whole or not
at all, but a failure after the first leaves the batches before it.

It refuses to overwrite: if any key of the source exists in the
destination it writes nothing and names the key, unless --overwrite; and
each batch commits only if its keys are still absent then.

What does not carry over, and says so:
  - revisions, create revisions and versions: each side has its own. Every
    key is created anew in the destination, version 1, at the
    destination's next revisions; fencing tokens (create revisions) of
    one side mean nothing on the other.
  - lock holders: the lock library's keys (filelock/...) are left out;
    their tokens are revisions. Take the locks again on the other side.
  - leases: a key bound to a lease is bound to a new lease of the
    destination, granted with the time the source's lease had left (etcd
    rounds it up to whole seconds), so that it ends when it would have;
    the new lease has a new ID, and no process renews it: a holder that
    renews the old ID must renew the new one. A lease that has ended
    takes its keys with it.`

func newExportCmd(g *globals) *cobra.Command {
	o := &exportOpts{}
	c := &cobra.Command{
		Use:   "export [DIR] --to-etcd ENDPOINTS | --to-dir DIR",
		Short: "Copy a store's keys to an etcd cluster, or a cluster's keys to a store",
		Long:  exportLong,
		Example: `  kv data export --to-etcd 10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379
  kv --etcd $ETCD export --to-dir restored
  kv data export --to-etcd $ETCD --overwrite`,
		Args: func(cmd *cobra.Command, a []string) error {
			switch {
			case (o.toEtcd == "") == (o.toDir == ""):
				return kvcli.Usagef("export: give --to-etcd ENDPOINTS (from a data directory) or --to-dir DIR (from --etcd ENDPOINTS)")
			case o.toEtcd != "" && len(a) != 1:
				return kvcli.Usagef("export: want DIR export --to-etcd ENDPOINTS")
			case o.toDir != "" && (len(a) != 0 || g.endpoints == ""):
				return kvcli.Usagef("export: want --etcd ENDPOINTS export --to-dir DIR")
			case o.batch < 1 || o.batch > 128:
				return kvcli.Usagef("--batch %d: want 1 to 128 (etcd's default limit of operations per transaction)", o.batch)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			if o.toEtcd != "" {
				g.endpoints = o.toEtcd
				return exportToEtcd(cmd.OutOrStdout(), g, a[0], o)
			}
			return exportToDir(cmd.OutOrStdout(), g, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.toEtcd, "to-etcd", "", "copy the store in DIR to the cluster at these endpoints")
	f.StringVar(&o.toDir, "to-dir", "", "copy the cluster of --etcd to the store in this directory")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace the keys that exist in the destination")
	f.IntVar(&o.batch, "batch", 100, "keys per transaction")
	return c
}

// item is one key on its way, with the time its lease has left (0:
// none).
type item struct {
	key, value []byte
	lease      int64 // the source's lease ID, 0 for none
	left       time.Duration
}

// batches splits items into transactions of at most n keys and
// batchBytes.
func batches(items []item, n int) [][]item {
	var out [][]item
	var cur []item
	size := 0
	for _, it := range items {
		sz := len(it.key) + len(it.value)
		if len(cur) > 0 && (len(cur) == n || size+sz > batchBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, it)
		size += sz
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// isLockKey reports whether key is the lock library's, left out.
func isLockKey(key []byte) bool { return bytes.HasPrefix(key, []byte(filelock.KeyPrefix)) }

// progress shows "export: N of M keys" on stderr when it is a terminal.
type progress struct {
	w     io.Writer
	total int
	on    bool
}

func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, total: total, on: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progress) at(n int) {
	if p.on {
		fmt.Fprintf(p.w, "\rexport: %d of %d keys", n, p.total)
	}
}

func (p *progress) done() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}

// conflicts words the keys of the source that exist in the destination.
func conflicts(keys [][]byte, where string) error {
	shown := make([]string, 0, 3)
	for _, k := range keys[:min(len(keys), 3)] {
		shown = append(shown, fmt.Sprintf("%q", k))
	}
	more := ""
	if len(keys) > 3 {
		more = fmt.Sprintf(" and %d more", len(keys)-3)
	}
	return fmt.Errorf("export: %d keys exist %s already (%s%s): nothing written; --overwrite replaces them", len(keys), where, strings.Join(shown, ", "), more)
}

// report prints what export did and what did not carry over.
func report(w io.Writer, n, txns int, revs string, leases, lockKeys, ended int) error {
	fmt.Fprintf(w, "exported %s in %s (%s)\n", kvcli.Plural(n, "key"), kvcli.Plural(txns, "transaction"), revs)
	fmt.Fprintln(w, "not carried over: revisions, create revisions and versions (every key is created anew, version 1)")
	if leases > 0 {
		fmt.Fprintf(w, "leases: %s granted anew with the time left (new IDs, renewed by no one)\n", kvcli.Plural(leases, "lease"))
	}
	if ended > 0 {
		fmt.Fprintf(w, "left out: %s whose lease has ended\n", kvcli.Plural(ended, "key"))
	}
	if lockKeys > 0 {
		fmt.Fprintf(w, "left out: %s of lock holders (%s): take the locks again\n", kvcli.Plural(lockKeys, "key"), filelock.KeyPrefix)
	}
	return nil
}

func exportToEtcd(w io.Writer, g *globals, dir string, o *exportOpts) error {
	s, err := kv.Open(dir, &kv.Options{ReadOnly: true, NoCreate: true})
	if err != nil {
		return err
	}
	defer s.Close()
	ls, err := s.Leases()
	if err != nil {
		return err
	}
	now := time.Now()
	leaseOf := map[string]kv.LeaseInfo{}
	for _, l := range ls {
		for _, k := range l.Keys {
			leaseOf[string(k)] = l
		}
	}
	var items []item
	lockKeys, ended := 0, 0
	for e, err := range s.ScanErr(nil, nil) {
		if err != nil {
			return err
		}
		if isLockKey(e.Key) {
			lockKeys++
			continue
		}
		it := item{key: e.Key, value: e.Value}
		if l, ok := leaseOf[string(e.Key)]; ok {
			it.lease, it.left = int64(l.ID), l.Deadline.Sub(now)
			if it.left <= 0 {
				ended++
				continue
			}
		}
		items = append(items, it)
	}
	cli, db, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	bs := batches(items, o.batch)
	if !o.overwrite {
		var exist [][]byte
		for _, b := range bs {
			ops := make([]clientv3.Op, len(b))
			for i, it := range b {
				ops[i] = clientv3.OpGet(string(it.key), clientv3.WithCountOnly())
			}
			ctx, cancel := g.ctx()
			resp, err := cli.Txn(ctx).Then(ops...).Commit()
			cancel()
			if err != nil {
				return g.describe(err)
			}
			for i, r := range resp.Responses {
				if r.GetResponseRange().Count > 0 {
					exist = append(exist, b[i].key)
				}
			}
		}
		if len(exist) > 0 {
			return conflicts(exist, "on the cluster")
		}
	}
	granted := map[int64]clientv3.LeaseID{}
	p := newProgress(g.stderr, len(items))
	var first, last int64
	done := 0
	for _, b := range bs {
		ctx, cancel := g.ctx()
		var cmps []clientv3.Cmp
		ops := make([]clientv3.Op, 0, len(b))
		for _, it := range b {
			if !o.overwrite {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(string(it.key)), "=", 0))
			}
			if it.lease == 0 {
				ops = append(ops, clientv3.OpPut(string(it.key), string(it.value)))
				continue
			}
			id, ok := granted[it.lease]
			if !ok {
				info, err := db.Grant(ctx, it.left)
				if err != nil {
					cancel()
					return g.describe(err)
				}
				id = clientv3.LeaseID(info.ID)
				granted[it.lease] = id
			}
			ops = append(ops, clientv3.OpPut(string(it.key), string(it.value), clientv3.WithLease(id)))
		}
		resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			p.done()
			return fmt.Errorf("export: after %d of %d keys: %w", done, len(items), g.describe(err))
		}
		if !resp.Succeeded {
			p.done()
			return fmt.Errorf("export: after %d of %d keys: a key of the next batch was created on the cluster meanwhile: that batch is not written (--overwrite replaces)", done, len(items))
		}
		if first == 0 {
			first = resp.Header.Revision
		}
		last = resp.Header.Revision
		done += len(b)
		p.at(done)
	}
	p.done()
	revs := "no revision"
	if first != 0 {
		revs = fmt.Sprintf("cluster revisions %d to %d", first, last)
	}
	return report(w, done, len(bs), revs, len(granted), lockKeys, ended)
}

func exportToDir(w io.Writer, g *globals, o *exportOpts) error {
	cli, _, err := g.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	var items []item
	lockKeys, ended := 0, 0
	left := map[int64]time.Duration{}
	for e, err := range pages(ctx, cli, nil, nil) {
		if err != nil {
			return g.describe(err)
		}
		if isLockKey(e.Key) {
			lockKeys++
			continue
		}
		it := item{key: e.Key, value: e.Value, lease: e.Lease}
		if e.Lease != 0 {
			d, ok := left[e.Lease]
			if !ok {
				rctx, cancel := g.ctx()
				resp, err := cli.TimeToLive(rctx, clientv3.LeaseID(e.Lease))
				cancel()
				if err != nil {
					return g.describe(err)
				}
				d = time.Duration(resp.TTL) * time.Second // -1: ended
				left[e.Lease] = d
			}
			if d <= 0 {
				ended++
				continue
			}
			it.left = d
		}
		items = append(items, it)
	}
	s, err := kv.Open(o.toDir, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	if !o.overwrite {
		var exist [][]byte
		for _, it := range items {
			if _, err := s.Get(it.key); err == nil {
				exist = append(exist, it.key)
			}
		}
		if len(exist) > 0 {
			return conflicts(exist, "in "+o.toDir)
		}
	}
	granted := map[int64]kv.LeaseID{}
	bs := batches(items, o.batch)
	p := newProgress(g.stderr, len(items))
	var first, last kv.Revision
	done := 0
	for _, b := range bs {
		var t kv.Txn
		for _, it := range b {
			if !o.overwrite {
				t.If = append(t.If, kv.CompareModRev(it.key, kv.Equal, 0))
			}
			op := kv.PutOp(it.key, it.value)
			if it.lease != 0 {
				id, ok := granted[it.lease]
				if !ok {
					if id, err = s.Grant(it.left); err != nil {
						p.done()
						return fmt.Errorf("export: after %d of %d keys: %w", done, len(items), err)
					}
					granted[it.lease] = id
				}
				op = op.WithLease(id)
			}
			t.Then = append(t.Then, op)
		}
		res, err := s.Txn(t)
		if err != nil {
			p.done()
			return fmt.Errorf("export: after %d of %d keys: %w", done, len(items), err)
		}
		if !res.Succeeded {
			p.done()
			return fmt.Errorf("export: after %d of %d keys: a key of the next batch was created in %s meanwhile: that batch is not written (--overwrite replaces)", done, len(items), o.toDir)
		}
		if first == 0 {
			first = res.Revision
		}
		last = res.Revision
		done += len(b)
		p.at(done)
	}
	p.done()
	if err := s.Close(); err != nil {
		return err
	}
	revs := "no revision"
	if first != 0 {
		revs = fmt.Sprintf("revisions %d to %d of %s", first, last, o.toDir)
	}
	return report(w, done, len(bs), revs, len(granted), lockKeys, ended)
}
