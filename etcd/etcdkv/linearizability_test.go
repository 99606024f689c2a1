package etcdkv_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

var long = flag.Bool("long", false, "run the long linearizability and lock runs: more clients, more faults, longer")

// opTimeout bounds each operation of the linearizability clients: one
// sent to a member that was just killed or stopped fails after it, with
// an unknown outcome if it was a write.
const opTimeout = 2 * time.Second

// linClock hands out timestamps: taken before a call and after its
// return, they order two operations exactly when one returned before
// the other was called.
type linClock struct{ n atomic.Int64 }

func (c *linClock) now() int64 { return c.n.Add(1) }

// linRecorder collects the history of concurrent clients. Operations of
// unknown outcome get their return time only at the end (end): they may
// take effect at any time until the cluster has settled.
type linRecorder struct {
	clock   linClock
	mu      sync.Mutex
	ops     []porcupine.Operation
	unknown []int // indexes into ops
	stats   map[string]int
}

func (r *linRecorder) record(client int, in linInput, out linOutput, call, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stats == nil {
		r.stats = map[string]int{}
	}
	r.stats[in.kind.String()]++
	if out.err == errUnknown {
		r.unknown = append(r.unknown, len(r.ops))
		r.stats["unknown outcome"]++
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// end gives every operation of unknown outcome the return time now.
func (r *linRecorder) end() {
	now := r.clock.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range r.unknown {
		r.ops[i].Return = now
	}
}

// linDo runs in on db and returns its output; ok false for a read that
// failed (it changed nothing: it is left out of the history).
func linDo(db kvapi.KV, in linInput) (out linOutput, ok bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	k := []byte(in.key)
	switch in.kind {
	case linGet:
		e, err := db.Get(ctx, k)
		switch {
		case errors.Is(err, kv.ErrNotFound):
			out.err = errNotFound
		case err != nil:
			return out, false, nil
		default:
			out.found, out.value = true, string(e.Value)
			out.createRev, out.modRev, out.version = int64(e.CreateRev), int64(e.ModRev), e.Version
		}
		return out, true, nil
	case linPut:
		var rev kv.Revision
		rev, err = kvapi.Put(ctx, db, k, []byte(in.value))
		out.rev, out.committed = int64(rev), err == nil
	case linAdd:
		var rev kv.Revision
		out.n, rev, err = kvapi.Add(ctx, db, k, in.delta)
		out.rev, out.committed = int64(rev), err == nil
	case linDelete:
		var rev kv.Revision
		rev, err = kvapi.Delete(ctx, db, k)
		out.rev, out.committed = int64(rev), err == nil
	case linCASValue, linCASModRev:
		c := kv.CompareValue(k, kv.Equal, []byte(in.expect))
		if in.kind == linCASModRev {
			c = kv.CompareModRev(k, kv.Equal, kv.Revision(in.expectRev))
		}
		var res kv.TxnResult
		res, err = db.Txn(ctx, kv.Txn{If: []kv.Compare{c}, Then: []kv.Op{kv.PutOp(k, []byte(in.value))}})
		out.ok, out.committed, out.rev = res.Succeeded, res.Committed, int64(res.Revision)
	}
	switch {
	case err == nil:
	case errors.Is(err, kv.ErrNotFound):
		out.err = errNotFound
	case errors.Is(err, kv.ErrNotInteger):
		out.err = errNotInteger
	case errors.Is(err, kvapi.ErrUnknownOutcome):
		// The model allows it applied once, or not at all.
		out.err, out.committed = errUnknown, false
	default:
		// The adapter says, by not matching kvapi.ErrUnknownOutcome,
		// that nothing was written (a read before the write failed, the
		// context ended before it was sent): the model holds it to that.
		out.err, out.committed = errFailed, false
	}
	return out, true, nil
}

var linKeys = []string{"k0", "k1", "k2"}

// faultRun paces the clients of a run with faults by counts, not by the
// clock: each phase of the run allows them a number of operations more
// (allow), and a client waits, keeping nothing, while the operations
// completed (acknowledged, failed or of unknown outcome) have reached
// what is allowed, until the next phase or the end of the run (end).
// What they do in all is so bounded by the phases' counts, plus one
// operation in flight per client, however long a phase lasts.
type faultRun struct {
	done    atomic.Int64 // operations completed
	allowed atomic.Int64 // operations allowed so far
	stop    chan struct{}
	once    sync.Once
}

func newFaultRun() *faultRun { return &faultRun{stop: make(chan struct{})} }

// more waits until a client may start another operation, and reports
// false once the run has ended.
func (r *faultRun) more() bool {
	for r.done.Load() >= r.allowed.Load() {
		select {
		case <-r.stop:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case <-r.stop:
		return false
	default:
		return true
	}
}

// allow lets the clients complete n operations more, from those
// completed now, and returns the count they reach then.
func (r *faultRun) allow(n int) int64 {
	target := r.done.Load() + int64(n)
	r.allowed.Store(target)
	return target
}

// end stops the clients after the operations they are in.
func (r *faultRun) end() { r.once.Do(func() { close(r.stop) }) }

// waitOps allows n operations more and waits until the clients have
// completed them, a minute at most.
func (r *faultRun) waitOps(t *testing.T, n int, phase string) {
	t.Helper()
	target := r.allow(n)
	deadline := time.Now().Add(time.Minute)
	for r.done.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d operations in a minute", phase, int64(n)-(target-r.done.Load()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// linClient runs random operations until run ends.
func linClient(db kvapi.KV, r *linRecorder, client int, seed uint64, run *faultRun) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	last := map[string]linOutput{}
	for i := 0; run.more(); i++ {
		key := linKeys[rng.IntN(len(linKeys))]
		in := linInput{key: key, value: strconv.Itoa(client*1_000_000 + i*10)}
		if rng.IntN(8) == 0 {
			in.value = fmt.Sprintf("s%d.%d", client, i)
		}
		switch p := rng.IntN(100); {
		case p < 30:
			in.kind = linGet
		case p < 45:
			in.kind = linPut
		case p < 65:
			in.kind, in.delta = linAdd, int64(rng.IntN(5)+1)
		case p < 70:
			in.kind = linDelete
		case p < 85:
			in.kind, in.expect = linCASValue, last[key].value
		default:
			in.kind, in.expectRev = linCASModRev, last[key].modRev
		}
		call := r.clock.now()
		out, ok, err := linDo(db, in)
		ret := r.clock.now()
		run.done.Add(1)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		r.record(client, in, out, call, ret)
		if in.kind == linGet {
			last[key] = out
		}
	}
	return nil
}

// fault is what happens to the leader mid-run.
type fault int

const (
	noFault fault = iota
	killLeader
	stopLeader
	// stopMajority pauses the leader and another member, long enough
	// for the third to end its watches for want of a leader
	// (TestWatchLeaderFaults only).
	stopMajority
)

func (f fault) String() string { return [...]string{"none", "kill", "stop", "stop a majority with"}[f] }

type linConfig struct {
	clients int
	// phaseOps is the operations each phase allows the clients, waited
	// for before the first fault and after each; faultHold is how long
	// each fault lasts.
	phaseOps  int
	faultHold time.Duration
	faults    []fault // one after another, each the leader of the time
	wrap      func(kvapi.KV) kvapi.KV
}

// runLinearizability runs the clients on a fresh 3-member cluster while
// the faults strike its leader (each: the leader killed with SIGKILL or
// paused with SIGSTOP, then restarted on its data or resumed), waits for
// the cluster to settle, reads every key from a new client, and returns
// the history.
//
// What the clients do is bounded by counts, not by the clock
// (faultRun): each phase allows them cfg.phaseOps operations. The
// phases before the first fault and after each end once they are done
// (a minute at most); a fault lasts cfg.faultHold, a time as the fault
// is (a paused leader holds its clients' operations until opTimeout, so
// that few of them end while it lasts). The history, and the check's
// work on it, are so bounded however fast or slow the machine.
func runLinearizability(t *testing.T, cfg linConfig) *linRecorder {
	t.Helper()
	c := cluster.ForTest(t, memberBin)
	rec := &linRecorder{}
	phases := 2*len(cfg.faults) + 1
	run := newFaultRun()
	dbs := make([]kvapi.KV, cfg.clients)
	for i := range dbs {
		dbs[i] = etcdkv.New(cluster.ClientForTest(t, c), nil)
		if cfg.wrap != nil {
			dbs[i] = cfg.wrap(dbs[i])
		}
	}
	errc := make(chan error, cfg.clients)
	var wg sync.WaitGroup
	// A failure part way stops the clients before their connections and
	// the cluster go.
	t.Cleanup(func() { run.end(); wg.Wait() })
	for i, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := linClient(db, rec, i, uint64(time.Now().UnixNano()), run); err != nil {
				errc <- err
			}
		}()
	}
	// Two minutes for the cluster's own steps, beside each phase's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(2+phases)*time.Minute)
	defer cancel()
	run.waitOps(t, cfg.phaseOps, "before the faults")
	for _, f := range cfg.faults {
		l, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Members[l]
		switch f {
		case killLeader:
			m.Kill()
		case stopLeader:
			m.Stop()
		}
		t.Logf("%v leader %s", f, m.Name)
		run.allow(cfg.phaseOps)
		time.Sleep(cfg.faultHold)
		switch f {
		case killLeader:
			if err := m.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		case stopLeader:
			m.Cont()
		}
		run.waitOps(t, cfg.phaseOps, fmt.Sprintf("after the %v", f))
	}
	run.end()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Settle: a write through the new leader commits every entry of the
	// leaders before it, or drops it for good.
	final := etcdkv.New(cluster.ClientForTest(t, c), nil)
	if _, err := kvapi.Put(ctx, final, []byte("settle"), nil); err != nil {
		t.Fatal(err)
	}
	rec.end()
	for _, k := range linKeys {
		call := rec.clock.now()
		out, ok, err := linDo(final, linInput{kind: linGet, key: k})
		if err != nil || !ok {
			t.Fatalf("final read of %s: %v", k, err)
		}
		rec.record(-1, linInput{kind: linGet, key: k}, out, call, rec.clock.now())
	}
	return rec
}

// checkHistory checks a history with the model and the revisions; when
// visualize is set, an illegal history is drawn into a file of the
// system's temporary directory, which the error names.
func checkHistory(rec *linRecorder, visualize bool) error {
	res, info := porcupine.CheckOperationsVerbose(linModel, rec.ops, time.Minute)
	switch res {
	case porcupine.Illegal:
		where := ""
		if visualize {
			if f, err := os.CreateTemp("", "etcdkv-history-*.html"); err == nil {
				porcupine.Visualize(linModel, info, f)
				f.Close()
				where = "; visualization in " + f.Name()
			}
		}
		return fmt.Errorf("not linearizable (%d operations%s)", len(rec.ops), where)
	case porcupine.Unknown:
		return fmt.Errorf("linearizability check timed out on %d operations", len(rec.ops))
	}
	return checkRevisions(rec.ops)
}

// TestLinearizability: concurrent clients on a 3-member cluster whose
// leader is killed and restarted, then paused and resumed, mid-run. No
// acknowledged write is lost, an add of unknown outcome is applied once
// or not at all, and every result is explained by one order of the
// operations that respects real time. -long runs longer, with more
// clients and faults.
func TestLinearizability(t *testing.T) {
	cfg := linConfig{clients: 4, phaseOps: 400, faultHold: 1600 * time.Millisecond, faults: []fault{killLeader, stopLeader}}
	if *long {
		cfg = linConfig{clients: 8, phaseOps: 4000, faultHold: 7 * time.Second,
			faults: []fault{killLeader, stopLeader, killLeader, stopLeader, killLeader, stopLeader}}
	}
	rec := runLinearizability(t, cfg)
	t.Logf("%d operations: %v", len(rec.ops), rec.stats)
	if err := checkHistory(rec, true); err != nil {
		t.Fatal(err)
	}
}
