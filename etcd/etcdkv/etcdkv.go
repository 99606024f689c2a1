package etcdkv

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
	"github.com/kvstore/kv/record"
)

// Options configure a KV. The zero value is valid.
type Options struct {
	// MaxAttempts bounds how often a transaction that reads before it
	// commits (one with an add, or a compare of a value NotEqual) reads
	// again because a write came between its read and its commit. 0
	// means until its context ends. It never bounds, nor causes, a retry
	// after an error: a write whose outcome is unknown is returned.
	MaxAttempts int
}

// KV is a kvapi.KV on an etcd cluster. Its methods are safe for
// concurrent use.
type KV struct {
	c      *clientv3.Client
	opts   Options
	closed atomic.Bool
	done   context.Context // ended by Close, ending the watches
	close  context.CancelFunc
	// resumes counts the etcd watches started again by this KV's
	// watches (a member without a leader, a previous value left out).
	resumes atomic.Int64
}

var (
	_ kvapi.KV    = (*KV)(nil)
	_ kvapi.Adder = (*KV)(nil)
)

// New returns the KV of the etcd cluster c talks to. The client stays
// the caller's: Close leaves it open. A nil o is the zero Options.
func New(c *clientv3.Client, o *Options) *KV {
	k := &KV{c: c}
	k.done, k.close = context.WithCancel(context.Background())
	if o != nil {
		k.opts = *o
	}
	return k
}

// Client returns the etcd client the KV uses.
func (k *KV) Client() *clientv3.Client { return k.c }

// Close marks the KV closed: every method returns kv.ErrClosed after it,
// and its watches end with it. The client stays open.
func (k *KV) Close() error {
	k.closed.Store(true)
	k.close()
	return nil
}

func (k *KV) check(ctx context.Context) error {
	if k.closed.Load() {
		return kv.ErrClosed
	}
	return ctx.Err()
}

func entry(e *mvccpb.KeyValue) kv.Entry {
	return kv.Entry{
		Key:       e.Key,
		Value:     e.Value,
		CreateRev: kv.Revision(e.CreateRevision),
		ModRev:    kv.Revision(e.ModRevision),
		Version:   e.Version,
	}
}

// Get reads key with a linearizable read (through the leader's read
// index), so it sees every write acknowledged before it began.
func (k *KV) Get(ctx context.Context, key []byte) (kv.Entry, error) {
	if err := k.check(ctx); err != nil {
		return kv.Entry{}, err
	}
	if len(key) == 0 {
		return kv.Entry{}, fmt.Errorf("%w: empty key", kv.ErrInvalid)
	}
	resp, err := k.c.Get(ctx, string(key))
	if err != nil {
		return kv.Entry{}, mapErr(err, false)
	}
	if len(resp.Kvs) == 0 {
		return kv.Entry{}, fmt.Errorf("%w: %q", kv.ErrNotFound, key)
	}
	return entry(resp.Kvs[0]), nil
}

// Range reads [start, end) with a linearizable read and returns the
// revision of the cluster it read at (the response header's).
func (k *KV) Range(ctx context.Context, start, end []byte, limit int) ([]kv.Entry, kv.Revision, error) {
	if err := k.check(ctx); err != nil {
		return nil, 0, err
	}
	if limit < 0 {
		return nil, 0, fmt.Errorf("%w: negative limit %d", kv.ErrInvalid, limit)
	}
	if len(start) == 0 {
		start = []byte{0} // keys are never empty
	}
	opts := []clientv3.OpOption{clientv3.WithLimit(int64(limit))}
	empty := false
	switch {
	case end == nil:
		opts = append(opts, clientv3.WithFromKey())
	case bytes.Compare(start, end) >= 0:
		// etcd reads an empty end as "this key alone" and "\x00" as
		// "no bound": ask for one key, count only, for the revision.
		empty = true
		opts = []clientv3.OpOption{clientv3.WithCountOnly()}
	default:
		opts = append(opts, clientv3.WithRange(string(end)))
	}
	resp, err := k.c.Get(ctx, string(start), opts...)
	if err != nil {
		return nil, 0, mapErr(err, false)
	}
	rev := kv.Revision(resp.Header.Revision)
	if empty {
		return nil, rev, nil
	}
	out := make([]kv.Entry, len(resp.Kvs))
	for i, e := range resp.Kvs {
		out[i] = entry(e)
	}
	return out, rev, nil
}

// Txn commits t as one etcd transaction (see the package doc for how it
// is built).
func (k *KV) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	res, _, err := k.txn(ctx, &t)
	return res, err
}

// Add adds delta to key's value by compare-and-swap on its mod
// revision (see the package doc), under fence if not nil.
func (k *KV) Add(ctx context.Context, key []byte, delta int64, fence *kv.Fence) (int64, kv.Revision, error) {
	t := kv.Txn{Then: []kv.Op{kv.AddOp(key, delta)}, Fence: fence}
	res, p, err := k.txn(ctx, &t)
	if err != nil {
		return 0, 0, err
	}
	n, err := record.ParseInt(p.values[0][0])
	if err != nil {
		return 0, 0, fmt.Errorf("etcdkv: the sum %q: %w", p.values[0][0], err)
	}
	return n, res.Revision, nil
}

// plan is one attempt of a transaction: what it read and what each
// branch writes.
type plan struct {
	read   map[string]*kv.Entry // the keys read first, nil when absent
	rev    int64                // the revision they were read at
	values [2][][]byte          // per branch (Then, Else), the value each op writes
	poison [2]error             // per branch: the error of an add that cannot apply
}

// txn runs t, reading first when it must, and attempting again while
// the keys it read changed before it committed.
func (k *KV) txn(ctx context.Context, t *kv.Txn) (kv.TxnResult, *plan, error) {
	if err := k.check(ctx); err != nil {
		return kv.TxnResult{}, nil, err
	}
	if err := validate(t); err != nil {
		return kv.TxnResult{}, nil, err
	}
	reads := readKeys(t)
	for attempt := 1; ; attempt++ {
		p := &plan{}
		if len(reads) > 0 {
			if err := k.read(ctx, reads, p); err != nil {
				return kv.TxnResult{}, nil, err
			}
		}
		res, again, err := k.commit(ctx, t, reads, p)
		if err != nil || !again {
			return res, p, err
		}
		if max := k.opts.MaxAttempts; max > 0 && attempt >= max {
			return kv.TxnResult{}, nil, fmt.Errorf("etcdkv: %d attempts, each raced by another write of the keys it read: %w", attempt, context.DeadlineExceeded)
		}
		if err := ctx.Err(); err != nil {
			return kv.TxnResult{}, nil, err
		}
	}
}

// validate refuses what package kv refuses (kv.ErrInvalid) and what etcd
// cannot do with kv's semantics (kvapi.ErrUnsupported): a branch that
// writes one key twice.
func validate(t *kv.Txn) error {
	if len(t.Then) == 0 && len(t.Else) == 0 && t.Fence == nil && len(t.If) == 0 {
		return fmt.Errorf("%w: empty transaction", kv.ErrInvalid)
	}
	for _, c := range t.If {
		if len(c.Key) == 0 {
			return fmt.Errorf("%w: empty key", kv.ErrInvalid)
		}
		if c.Target < record.TargetValue || c.Target > record.TargetExists || c.Cmp < record.CmpEqual || c.Cmp > record.CmpGreater {
			return fmt.Errorf("%w: malformed compare", kv.ErrInvalid)
		}
	}
	if t.Fence != nil && len(t.Fence.Key) == 0 {
		return fmt.Errorf("%w: empty fence key", kv.ErrInvalid)
	}
	for _, ops := range [][]kv.Op{t.Then, t.Else} {
		seen := map[string]bool{}
		for _, op := range ops {
			if len(op.Key) == 0 {
				return fmt.Errorf("%w: empty key", kv.ErrInvalid)
			}
			switch op.Kind {
			case record.KindPut, record.KindDelete, record.KindAdd:
			default:
				return fmt.Errorf("%w: unknown operation kind %d", kv.ErrInvalid, op.Kind)
			}
			switch {
			case op.Lease != 0 && op.Kind != record.KindPut:
				return fmt.Errorf("%w: a %s on a lease: only a put binds a key to a lease", kv.ErrInvalid, op.Kind)
			case op.Lease > math.MaxInt64:
				return fmt.Errorf("%w: etcd has no lease above %d", &kv.LeaseError{ID: op.Lease}, int64(math.MaxInt64))
			}
			if seen[string(op.Key)] {
				return fmt.Errorf("%w: key %q written twice in one branch of a transaction (etcd refuses it)", kvapi.ErrUnsupported, op.Key)
			}
			seen[string(op.Key)] = true
		}
	}
	return nil
}

// readKeys returns the keys a transaction must read before it commits:
// those of its adds, whose sums are computed here, and those of its
// value compares by NotEqual, which etcd evaluates as false on an absent
// key where package kv evaluates them as true.
func readKeys(t *kv.Txn) []string {
	var keys []string
	seen := map[string]bool{}
	add := func(k []byte) {
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, string(k))
		}
	}
	for _, c := range t.If {
		if c.Target == record.TargetValue && c.Cmp == kv.NotEqual {
			add(c.Key)
		}
	}
	for _, ops := range [][]kv.Op{t.Then, t.Else} {
		for _, op := range ops {
			if op.Kind == record.KindAdd {
				add(op.Key)
			}
		}
	}
	return keys
}

// read reads keys in one etcd transaction, so that they are one
// revision's state.
func (k *KV) read(ctx context.Context, keys []string, p *plan) error {
	ops := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		ops[i] = clientv3.OpGet(key)
	}
	resp, err := k.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return mapErr(err, false)
	}
	p.rev = resp.Header.Revision
	p.read = make(map[string]*kv.Entry, len(keys))
	for i, key := range keys {
		p.read[key] = nil
		if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			e := entry(kvs[0])
			p.read[key] = &e
		}
	}
	return nil
}

var relation = map[kv.Cmp]string{kv.Equal: "=", kv.NotEqual: "!=", kv.Less: "<", kv.Greater: ">"}

// never is a compare that never holds: no key has a negative create
// revision.
func never(key string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(key), "<", 0)
}

// compares translates t's compares. A value compare by NotEqual was read
// first (p.read): it is evaluated here, and its key is guarded by the
// caller.
func compares(t *kv.Txn, p *plan) []clientv3.Cmp {
	var out []clientv3.Cmp
	for _, c := range t.If {
		key, rel := string(c.Key), relation[c.Cmp]
		switch c.Target {
		case record.TargetValue:
			if c.Cmp == kv.NotEqual {
				if e := p.read[key]; e != nil && bytes.Equal(e.Value, c.Value) {
					out = append(out, never(key))
				}
				continue
			}
			out = append(out, clientv3.Compare(clientv3.Value(key), rel, string(c.Value)))
		case record.TargetVersion:
			out = append(out, clientv3.Compare(clientv3.Version(key), rel, c.Num))
		case record.TargetCreateRev:
			out = append(out, clientv3.Compare(clientv3.CreateRevision(key), rel, c.Num))
		case record.TargetModRev:
			out = append(out, clientv3.Compare(clientv3.ModRevision(key), rel, c.Num))
		case record.TargetExists:
			// Existence is 1 or 0: which of them the relation admits
			// decides the compare on the create revision.
			holds := func(n int64) bool {
				return c.Cmp == kv.Equal && n == c.Num || c.Cmp == kv.NotEqual && n != c.Num ||
					c.Cmp == kv.Less && n < c.Num || c.Cmp == kv.Greater && n > c.Num
			}
			switch present, absent := holds(1), holds(0); {
			case present && absent:
			case present:
				out = append(out, clientv3.Compare(clientv3.CreateRevision(key), ">", 0))
			case absent:
				out = append(out, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			default:
				out = append(out, never(key))
			}
		}
	}
	return out
}

// ops translates a branch; adds become puts of their sums, computed from
// what was read. An add that cannot apply poisons the branch: it is sent
// with no operations, and taking it is that add's error.
func ops(branch []kv.Op, b int, p *plan) []clientv3.Op {
	out := make([]clientv3.Op, 0, len(branch))
	p.values[b] = make([][]byte, len(branch))
	for i, op := range branch {
		key := string(op.Key)
		switch op.Kind {
		case record.KindPut:
			var opts []clientv3.OpOption
			if op.Lease != 0 {
				opts = append(opts, clientv3.WithLease(clientv3.LeaseID(op.Lease)))
			}
			out = append(out, clientv3.OpPut(key, string(op.Value), opts...))
			p.values[b][i] = op.Value
		case record.KindDelete:
			out = append(out, clientv3.OpDelete(key))
		case record.KindAdd:
			v, _, err := kvapi.NextValue(p.read[key], op)
			if err != nil {
				p.poison[b] = err
				return nil
			}
			// The sum replaces the value and keeps the key's lease, as
			// the store's add does: etcd's put would unbind it.
			var opts []clientv3.OpOption
			if p.read[key] != nil {
				opts = append(opts, clientv3.WithIgnoreLease())
			}
			out = append(out, clientv3.OpPut(key, string(v), opts...))
			p.values[b][i] = v
		}
	}
	return out
}

// commit sends one attempt: the fence around the guards of what was
// read, around t's own compares and branches,
//
//	if fence { if guards { if t.If { t.Then } else { t.Else } } }
//
// with each level left out when it has nothing to check. It reports
// again when a guard failed: a key read changed before the commit.
func (k *KV) commit(ctx context.Context, t *kv.Txn, reads []string, p *plan) (kv.TxnResult, bool, error) {
	thenOps, elseOps := ops(t.Then, 0, p), ops(t.Else, 1, p)
	inner := clientv3.OpTxn(compares(t, p), thenOps, elseOps)
	top := inner
	if len(reads) > 0 {
		guards := make([]clientv3.Cmp, len(reads))
		for i, key := range reads {
			var mod int64
			if e := p.read[key]; e != nil {
				mod = int64(e.ModRev)
			}
			guards[i] = clientv3.Compare(clientv3.ModRevision(key), "=", mod)
		}
		top = clientv3.OpTxn(guards, []clientv3.Op{top}, nil)
	}
	if f := t.Fence; f != nil {
		key, target := string(f.Key), clientv3.CreateRevision(string(f.Key))
		if f.By == kv.FenceModRev {
			target = clientv3.ModRevision(key)
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
			clientv3.Compare(target, "=", int64(f.Token)),
		}
		top = clientv3.OpTxn(cmps, []clientv3.Op{top}, nil)
	}
	cmps, then, els := top.Txn()
	resp, err := k.c.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		// A put on a lease that ended in the branch taken: refused.
		return kv.TxnResult{}, false, leaseErr(err, txnLease(t))
	}
	rev := kv.Revision(resp.Header.Revision)
	// The levels around the inner transaction write nothing: the
	// header's revision is the inner one's, or the current one when it
	// wrote nothing either.
	r := (*pb.TxnResponse)(resp)
	if t.Fence != nil {
		if !r.Succeeded {
			return kv.TxnResult{}, false, fmt.Errorf("%w: fence key %q no longer at %s revision %d", kv.ErrFenced, t.Fence.Key, by(t.Fence.By), t.Fence.Token)
		}
		r = r.Responses[0].GetResponseTxn()
	}
	if len(reads) > 0 {
		if !r.Succeeded {
			return kv.TxnResult{}, true, nil
		}
		r = r.Responses[0].GetResponseTxn()
	}
	b, branch := 0, t.Then
	if !r.Succeeded {
		b, branch = 1, t.Else
	}
	if err := p.poison[b]; err != nil {
		return kv.TxnResult{}, false, err
	}
	res := kv.TxnResult{Succeeded: r.Succeeded, Revision: rev}
	for i, op := range branch {
		switch op.Kind {
		case record.KindPut, record.KindAdd:
			res.Committed = true
		case record.KindDelete:
			if r.Responses[i].GetResponseDeleteRange().GetDeleted() > 0 {
				res.Committed = true
			}
		}
	}
	return res, false, nil
}

func by(b kv.FenceBy) string {
	if b == kv.FenceModRev {
		return "mod"
	}
	return "create"
}
