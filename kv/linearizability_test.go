package kv_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// The linearizability tests run concurrent clients against one store,
// record every call and return, and ask porcupine whether some order of
// the operations, consistent with real time, explains every result under
// the sequential model below. The model is per key (the history is
// partitioned by key); the global revision counter, which ties the keys
// together, is checked separately by checkRevisions.

// linKind is the kind of a recorded operation.
type linKind uint8

const (
	linGet linKind = iota
	linPut
	linAdd
	linDelete
	linCASValue  // Txn{If: CompareValue(key, Equal, expect), Then: PutOp(key, value)}
	linCASModRev // Txn{If: CompareModRev(key, Equal, expectRev), Then: PutOp(key, value)}
)

func (k linKind) String() string {
	return [...]string{"get", "put", "add", "delete", "cas-value", "cas-modrev"}[k]
}

// linErr is the class of error an operation returned; any other error
// fails the test.
type linErr uint8

const (
	errNone linErr = iota
	errNotFound
	errNotInteger
)

func classify(err error) (linErr, bool) {
	switch {
	case err == nil:
		return errNone, true
	case errors.Is(err, kv.ErrNotFound):
		return errNotFound, true
	case errors.Is(err, kv.ErrNotInteger):
		return errNotInteger, true
	}
	return 0, false
}

type linInput struct {
	kind      linKind
	key       string
	value     string // put and CAS: the value written
	delta     int64  // add
	expect    string // cas-value: the value compared
	expectRev kv.Revision
}

type linOutput struct {
	err linErr
	// get
	found     bool
	value     string
	createRev kv.Revision
	modRev    kv.Revision
	version   int64
	// writes
	rev       kv.Revision // the revision committed at, when committed
	committed bool
	n         int64 // add: the new value
	ok        bool  // cas: the compare held
}

// linState is one key's state in the model. lastRev is the revision of
// the last write to the key, kept across a delete: revisions of one key's
// writes must increase in the linearization order.
type linState struct {
	exists    bool
	value     string
	createRev kv.Revision
	modRev    kv.Revision
	version   int64
	lastRev   kv.Revision
}

// written returns the state after a write of value committed at rev.
func (s linState) written(value string, rev kv.Revision) linState {
	if !s.exists {
		s.createRev, s.version = rev, 0
	}
	s.exists, s.value, s.modRev, s.lastRev = true, value, rev, rev
	s.version++
	return s
}

func linStep(state, input, output any) (bool, any) {
	s, in, out := state.(linState), input.(linInput), output.(linOutput)
	// A committed write must come after the key's previous write.
	fresh := out.err == errNone && out.committed && out.rev > s.lastRev
	switch in.kind {
	case linGet:
		if !s.exists {
			return !out.found && out.err == errNotFound, s
		}
		return out.err == errNone && out.found && out.value == s.value && out.createRev == s.createRev &&
			out.modRev == s.modRev && out.version == s.version, s
	case linPut:
		return fresh, s.written(in.value, out.rev)
	case linAdd:
		var cur int64
		if s.exists {
			n, err := strconv.ParseInt(s.value, 10, 64)
			if err != nil {
				return out.err == errNotInteger && !out.committed, s
			}
			cur = n
		}
		n := cur + in.delta
		return fresh && out.n == n, s.written(strconv.FormatInt(n, 10), out.rev)
	case linDelete:
		if !s.exists {
			return out.err == errNotFound && !out.committed, s
		}
		return fresh, linState{lastRev: out.rev}
	case linCASValue, linCASModRev:
		var holds bool
		if in.kind == linCASValue {
			holds = s.exists && s.value == in.expect
		} else {
			holds = s.modRev == in.expectRev // 0 when absent
		}
		if !holds {
			return out.err == errNone && !out.ok && !out.committed, s
		}
		return fresh && out.ok, s.written(in.value, out.rev)
	}
	return false, s
}

// linModel is the sequential specification of the store for single-key
// operations, partitioned by key.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.kind {
		case linGet:
			if !out.found {
				return fmt.Sprintf("get(%s) -> absent", in.key)
			}
			return fmt.Sprintf("get(%s) -> %q c%d m%d v%d", in.key, out.value, out.createRev, out.modRev, out.version)
		case linPut:
			return fmt.Sprintf("put(%s, %q) -> r%d", in.key, in.value, out.rev)
		case linAdd:
			return fmt.Sprintf("add(%s, %d) -> %d r%d err%d", in.key, in.delta, out.n, out.rev, out.err)
		case linDelete:
			return fmt.Sprintf("delete(%s) -> r%d err%d", in.key, out.rev, out.err)
		case linCASValue:
			return fmt.Sprintf("cas(%s, %q -> %q) -> %v r%d", in.key, in.expect, in.value, out.ok, out.rev)
		}
		return fmt.Sprintf("cas(%s, m%d -> %q) -> %v r%d", in.key, in.expectRev, in.value, out.ok, out.rev)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		if !s.exists {
			return fmt.Sprintf("absent (last r%d)", s.lastRev)
		}
		return fmt.Sprintf("%q c%d m%d v%d", s.value, s.createRev, s.modRev, s.version)
	},
}

// linClock hands out timestamps: taken before a call and after its
// return, they order two operations exactly when one returned before the
// other was called.
type linClock struct{ n atomic.Int64 }

func (c *linClock) now() int64 { return c.n.Add(1) }

// linDo runs in against s and returns its output, or an error for an
// outcome the model has no place for.
func linDo(s *kv.Store, in linInput) (linOutput, error) {
	var out linOutput
	var err error
	k := []byte(in.key)
	switch in.kind {
	case linGet:
		var e kv.Entry
		e, err = s.Get(k)
		if err == nil {
			out.found, out.value = true, string(e.Value)
			out.createRev, out.modRev, out.version = e.CreateRev, e.ModRev, e.Version
		}
	case linPut:
		out.rev, err = s.Put(k, []byte(in.value))
		out.committed = err == nil
	case linAdd:
		out.n, out.rev, err = s.Add(k, in.delta)
		out.committed = err == nil
	case linDelete:
		out.rev, err = s.Delete(k)
		out.committed = err == nil
	case linCASValue, linCASModRev:
		c := kv.CompareValue(k, kv.Equal, []byte(in.expect))
		if in.kind == linCASModRev {
			c = kv.CompareModRev(k, kv.Equal, in.expectRev)
		}
		var res kv.TxnResult
		res, err = s.Txn(kv.Txn{If: []kv.Compare{c}, Then: []kv.Op{kv.PutOp(k, []byte(in.value))}})
		out.ok, out.committed = res.Succeeded, res.Committed
		if res.Committed {
			out.rev = res.Revision
		}
	}
	var ok bool
	if out.err, ok = classify(err); !ok {
		return out, fmt.Errorf("%v(%s): %w", in.kind, in.key, err)
	}
	return out, nil
}

// linRecorder collects the history of concurrent clients.
type linRecorder struct {
	clock linClock
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (r *linRecorder) run(s *kv.Store, client int, in linInput) (linOutput, error) {
	call := r.clock.now()
	out, err := linDo(s, in)
	ret := r.clock.now()
	if err != nil {
		return out, err
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
	return out, nil
}

var linKeys = []string{"k0", "k1", "k2"}

// linClient runs ops random operations. CAS operations compare against
// what the client read last, or now and then against a stale guess, so
// that both outcomes happen.
func linClient(s *kv.Store, r *linRecorder, client, ops int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	last := map[string]linOutput{}
	for i := range ops {
		key := linKeys[rng.IntN(len(linKeys))]
		in := linInput{key: key}
		// Values are unique per write, and mostly integers so that adds
		// apply; a few are not, so that adds also fail.
		in.value = strconv.Itoa(client*1_000_000 + i*10)
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
			if rng.IntN(4) == 0 {
				in.expect = strconv.Itoa(rng.IntN(10))
			}
		default:
			in.kind, in.expectRev = linCASModRev, last[key].modRev
			if rng.IntN(4) == 0 {
				in.expectRev = kv.Revision(rng.IntN(5))
			}
		}
		out, err := r.run(s, client, in)
		if err != nil {
			return err
		}
		if in.kind == linGet {
			last[key] = out
		}
	}
	return nil
}

// checkRevisions checks what the per-key model cannot see: the committed
// writes have the revisions 1..final, each once, in an order consistent
// with real time (a write that returned before another was called has the
// lower revision).
func checkRevisions(history []porcupine.Operation, final kv.Revision) error {
	var writes []porcupine.Operation
	seen := map[kv.Revision]bool{}
	for _, op := range history {
		out := op.Output.(linOutput)
		if !out.committed {
			continue
		}
		if seen[out.rev] {
			return fmt.Errorf("revision %d committed twice", out.rev)
		}
		seen[out.rev] = true
		writes = append(writes, op)
	}
	if kv.Revision(len(writes)) != final {
		return fmt.Errorf("%d writes committed, final revision %d", len(writes), final)
	}
	for r := kv.Revision(1); r <= final; r++ {
		if !seen[r] {
			return fmt.Errorf("revision %d missing of 1..%d", r, final)
		}
	}
	sort.Slice(writes, func(i, j int) bool {
		return writes[i].Output.(linOutput).rev > writes[j].Output.(linOutput).rev
	})
	// Walking down the revisions, minRet is the earliest return among the
	// writes with a higher revision: none may have returned before a
	// lower revision's write was called.
	minRet, minRev := int64(1<<62), kv.Revision(0)
	for _, op := range writes {
		rev := op.Output.(linOutput).rev
		if minRet < op.Call {
			return fmt.Errorf("revision %d returned at %d, before revision %d was called at %d", minRev, minRet, rev, op.Call)
		}
		if op.Return < minRet {
			minRet, minRev = op.Return, rev
		}
	}
	return nil
}

type linConfig struct {
	clients, ops int
	opts         kv.Options
	dir          string
	// mem, when set, is the file system (dir is then a path in it).
	mem *vfs.MemFS
	// crash reopens the store at the end on mem's crash clone rather than
	// after a clean Close: under Always a power loss may lose nothing
	// acknowledged.
	crash bool
	// powerLosses takes that many crash clones of mem while the clients
	// run, and reads every key from each.
	powerLosses int
	bug         variant.Bug // a bug variant the store runs with
}

// linRun is what runLinearizability recorded.
type linRun struct {
	history []porcupine.Operation
	final   kv.Revision // the revision after the final reopen
	losses  []powerLoss
}

// powerLoss is a crash clone taken while the clients ran: between the
// timestamps before and after, and the reads of every key after recovery.
type powerLoss struct {
	before, after int64
	reads         []porcupine.Operation
	rev           kv.Revision
}

// runLinearizability runs the clients, then reopens the store and reads
// every key once more, appended to the history after every other
// operation: the recovered state must be where the history left off.
func runLinearizability(t *testing.T, cfg linConfig, seed uint64) linRun {
	t.Helper()
	opts := cfg.opts
	if cfg.mem != nil {
		opts.FS = variant.Wrap(cfg.mem, cfg.bug)
	}
	s, err := kv.Open(cfg.dir, &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := &linRecorder{}
	var wg sync.WaitGroup
	errc := make(chan error, cfg.clients+1)
	for c := range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := linClient(s, rec, c, cfg.ops, seed); err != nil {
				errc <- err
			}
		}()
	}
	var losses []powerLoss
	if cfg.powerLosses > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if losses, err = takePowerLosses(rec, cfg, opts); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if cfg.crash {
		opts.FS = cfg.mem.CrashClone()
		s.Close()
	} else if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := kv.Open(cfg.dir, &opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	for _, k := range linKeys {
		if _, err := rec.run(r, cfg.clients, linInput{kind: linGet, key: k}); err != nil {
			t.Fatal(err)
		}
	}
	return linRun{history: rec.ops, final: r.Revision(), losses: losses}
}

// takePowerLosses takes cfg.powerLosses crash clones of cfg.mem spread
// over the run, recovers each and reads every key.
func takePowerLosses(rec *linRecorder, cfg linConfig, opts kv.Options) ([]powerLoss, error) {
	var out []powerLoss
	total := int64(2 * cfg.clients * cfg.ops) // two timestamps per operation
	for i := range cfg.powerLosses {
		for rec.clock.n.Load() < total*int64(i+1)/int64(cfg.powerLosses+1) {
			time.Sleep(20 * time.Microsecond)
		}
		var pl powerLoss
		pl.before = rec.clock.now()
		clone := cfg.mem.CrashClone()
		pl.after = rec.clock.now()
		o := opts
		// A writer's open, as after a reboot: a read-only one shows only
		// what a record claims durable, which need not be the last group.
		o.FS = clone
		r, err := kv.Open(cfg.dir, &o)
		if err != nil {
			return nil, fmt.Errorf("recovery after a power loss: %w", err)
		}
		for _, k := range linKeys {
			in := linInput{kind: linGet, key: k}
			op, err := linDo(r, in)
			if err != nil {
				r.Close()
				return nil, err
			}
			pl.reads = append(pl.reads, porcupine.Operation{ClientId: cfg.clients, Input: in, Output: op})
		}
		pl.rev = r.Revision()
		r.Close()
		out = append(out, pl)
	}
	return out, nil
}

// lossHistory is the history a power loss pl must be linearizable in,
// when every acknowledged write is durable (Always) and the clone holds a
// prefix of the revisions (up to pl.rev). Timestamps are doubled to make
// room between them. It holds the operations that returned before the
// clone was taken; the writes that committed at pl.rev or below, made to
// return by the time the clone was taken; and the reads of the clone,
// after that. A write acknowledged before the clone but missing from it,
// or the clone's holding a write that never committed, makes it
// non-linearizable.
func lossHistory(history []porcupine.Operation, pl powerLoss) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range history {
		out1 := op.Output.(linOutput)
		op.Call, op.Return = 2*op.Call, 2*op.Return
		switch {
		case op.Return < 2*pl.before:
		case out1.committed && out1.rev <= pl.rev:
			op.Return = 2 * pl.after
		default:
			continue
		}
		out = append(out, op)
	}
	for _, op := range pl.reads {
		op.Call, op.Return = 2*pl.after+1, 2*pl.after+1
		out = append(out, op)
	}
	return out
}

func checkLinearizable(t *testing.T, history []porcupine.Operation, final kv.Revision) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(linModel, history, 5*time.Second)
	switch res {
	case porcupine.Illegal:
		t.Errorf("history of %d operations is not linearizable", len(history))
		if testing.Verbose() {
			for _, part := range info.PartialLinearizationsOperations() {
				for _, lin := range part {
					var ops []string
					for _, op := range lin {
						ops = append(ops, linModel.DescribeOperation(op.Input, op.Output))
					}
					t.Logf("longest linearizable prefix: %v", ops)
				}
			}
		}
	case porcupine.Unknown:
		t.Logf("porcupine timed out on %d operations; result unknown", len(history))
	}
	if err := checkRevisions(history, final); err != nil {
		t.Error(err)
	}
}

// checkCoverage fails when the workload did not reach the outcomes that
// make the history interesting: both outcomes of both kinds of CAS, adds
// that applied and adds that met a non-integer, deletes of present and
// missing keys.
func checkCoverage(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	seen := map[string]int{}
	for _, op := range history {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		name := in.kind.String()
		switch {
		case in.kind == linCASValue || in.kind == linCASModRev:
			name += fmt.Sprintf(" ok=%v", out.ok)
		case out.err == errNotFound:
			name += " not found"
		case out.err == errNotInteger:
			name += " not integer"
		}
		seen[name]++
	}
	t.Logf("outcomes: %v", seen)
	for _, want := range []string{"get", "get not found", "put", "add", "add not integer", "delete", "delete not found",
		"cas-value ok=true", "cas-value ok=false", "cas-modrev ok=true", "cas-modrev ok=false"} {
		if seen[want] == 0 {
			t.Errorf("no %q in the history: the workload misses a case", want)
		}
	}
}

func TestLinearizable(t *testing.T) {
	small := kv.Options{SegmentSize: 2 << 10, CheckpointBytes: 8 << 10}
	tests := []struct {
		name  string
		sync  kv.SyncMode
		os    bool
		crash bool
		// losses is the number of power losses during the run.
		losses int
		ops    int
	}{
		{name: "mem always, power loss", sync: kv.Always, crash: true, losses: 8, ops: 500},
		{name: "mem never", sync: kv.Never, ops: 500},
		{name: "mem interval", sync: kv.Interval(time.Millisecond), ops: 300},
		{name: "os always", sync: kv.Always, os: true, ops: 250},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := linConfig{clients: 8, ops: tc.ops, opts: small, crash: tc.crash, powerLosses: tc.losses}
			cfg.opts.Sync = tc.sync
			if tc.os {
				cfg.dir = t.TempDir()
			} else {
				cfg.dir, cfg.mem = "/data", vfs.NewMem()
			}
			seed := uint64(time.Now().UnixNano())
			run := runLinearizability(t, cfg, seed)
			checkLinearizable(t, run.history, run.final)
			checkCoverage(t, run.history)
			if len(run.losses) > 0 {
				var revs []kv.Revision
				for _, pl := range run.losses {
					revs = append(revs, pl.rev)
				}
				t.Logf("power losses recovered revisions %v of %d", revs, run.final)
			}
			for i, pl := range run.losses {
				h := lossHistory(run.history, pl)
				switch porcupine.CheckOperationsTimeout(linModel, h, 5*time.Second) {
				case porcupine.Illegal:
					t.Errorf("power loss %d (at %d..%d, recovered revision %d): the recovered state contradicts the acknowledged writes",
						i, pl.before, pl.after, pl.rev)
				case porcupine.Unknown:
					t.Logf("power loss %d: porcupine timed out; result unknown", i)
				}
			}
			if t.Failed() {
				t.Logf("seed %d", seed)
			}
		})
	}
}

// TestLinearizableCatchesLostWrite runs the power-loss checks on the
// store variant that acknowledges writes before syncing them: the
// recovered reads contradict the acknowledged history, both at the end
// and during the run.
func TestLinearizableCatchesLostWrite(t *testing.T) {
	opts := kv.Options{SegmentSize: 2 << 10, CheckpointBytes: -1}
	cfg := linConfig{clients: 4, ops: 100, opts: opts, dir: "/data", mem: vfs.NewMem(), crash: true, powerLosses: 8, bug: variant.NoSync}
	run := runLinearizability(t, cfg, 1)
	if res := porcupine.CheckOperationsTimeout(linModel, run.history, 5*time.Second); res != porcupine.Illegal {
		t.Errorf("history with writes lost by a power loss at the end checked %v, want Illegal", res)
	}
	caught := 0
	for _, pl := range run.losses {
		if porcupine.CheckOperationsTimeout(linModel, lossHistory(run.history, pl), 5*time.Second) == porcupine.Illegal {
			caught++
		}
	}
	if caught == 0 {
		t.Errorf("none of %d power losses during the run was found to lose acknowledged writes", len(run.losses))
	}
	t.Logf("%d of %d power losses during the run caught", caught, len(run.losses))
}

// TestLinearizabilityCheckerFails feeds the checkers hand-built histories:
// the broken ones must be refused, the sound ones accepted.
func TestLinearizabilityCheckerFails(t *testing.T) {
	type op struct {
		call, ret int64
		in        linInput
		out       linOutput
	}
	k := "k"
	put := func(call, ret int64, v string, rev kv.Revision) op {
		return op{call, ret, linInput{kind: linPut, key: k, value: v}, linOutput{rev: rev, committed: true}}
	}
	get := func(call, ret int64, v string, create, mod kv.Revision, version int64) op {
		return op{call, ret, linInput{kind: linGet, key: k},
			linOutput{found: true, value: v, createRev: create, modRev: mod, version: version}}
	}
	absent := func(call, ret int64) op {
		return op{call, ret, linInput{kind: linGet, key: k}, linOutput{err: errNotFound}}
	}
	add := func(call, ret int64, d, n int64, rev kv.Revision) op {
		return op{call, ret, linInput{kind: linAdd, key: k, delta: d}, linOutput{n: n, rev: rev, committed: true}}
	}
	cas := func(call, ret int64, expect, v string, ok bool, rev kv.Revision) op {
		return op{call, ret, linInput{kind: linCASValue, key: k, expect: expect, value: v},
			linOutput{ok: ok, rev: rev, committed: ok}}
	}
	tests := []struct {
		name  string
		ops   []op
		final kv.Revision
		want  porcupine.CheckResult
		// revErr: checkRevisions must refuse the history.
		revErr bool
	}{
		{name: "sequential", final: 2, want: porcupine.Ok, ops: []op{
			put(0, 1, "1", 1), get(2, 3, "1", 1, 1, 1), add(4, 5, 2, 3, 2), get(6, 7, "3", 1, 2, 2),
		}},
		{name: "concurrent read sees either", final: 2, want: porcupine.Ok, ops: []op{
			put(0, 1, "1", 1), put(2, 10, "2", 2), get(3, 4, "1", 1, 1, 1), get(5, 6, "2", 1, 2, 2),
		}},
		{name: "value never written", final: 1, want: porcupine.Illegal, ops: []op{
			put(0, 1, "1", 1), get(2, 3, "7", 1, 1, 1),
		}},
		{name: "stale read", final: 2, want: porcupine.Illegal, ops: []op{
			put(0, 1, "1", 1), put(2, 3, "2", 2), get(4, 5, "1", 1, 1, 1),
		}},
		{name: "read of a write not yet called", final: 1, want: porcupine.Illegal, ops: []op{
			get(0, 1, "1", 1, 1, 1), put(2, 3, "1", 1),
		}},
		{name: "lost acknowledged write", final: 1, want: porcupine.Illegal, ops: []op{
			put(0, 1, "1", 1), absent(2, 3),
		}},
		{name: "two adds return the same value", final: 2, want: porcupine.Illegal, ops: []op{
			add(0, 10, 1, 1, 1), add(1, 9, 1, 1, 2),
		}},
		{name: "two CAS from the same value both succeed", final: 3, want: porcupine.Illegal, ops: []op{
			put(0, 1, "0", 1), cas(2, 10, "0", "a", true, 2), cas(3, 9, "0", "b", true, 3),
		}},
		{name: "wrong mod revision", final: 2, want: porcupine.Illegal, ops: []op{
			put(0, 1, "1", 1), put(2, 3, "2", 2), get(4, 5, "2", 1, 1, 2),
		}},
		{name: "key revisions go backwards", final: 2, want: porcupine.Illegal, revErr: true, ops: []op{
			put(0, 1, "1", 2), put(2, 3, "2", 1),
		}},
		{name: "revision reused", final: 2, want: porcupine.Illegal, revErr: true, ops: []op{
			put(0, 1, "1", 1), put(2, 3, "2", 1),
		}},
		{name: "revision skipped", final: 3, want: porcupine.Ok, revErr: true, ops: []op{
			put(0, 1, "1", 1), put(2, 3, "2", 3),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, o := range tc.ops {
				history = append(history, porcupine.Operation{ClientId: i, Input: o.in, Call: o.call, Output: o.out, Return: o.ret})
			}
			if got := porcupine.CheckOperationsTimeout(linModel, history, 5*time.Second); got != tc.want {
				t.Errorf("porcupine: %v, want %v", got, tc.want)
			}
			if err := checkRevisions(history, tc.final); (err != nil) != tc.revErr {
				t.Errorf("checkRevisions: %v, want error %v", err, tc.revErr)
			}
		})
	}
	// Revision order against real time, across keys: the per-key model
	// cannot see it.
	history := []porcupine.Operation{
		{Input: linInput{kind: linPut, key: "a"}, Call: 0, Return: 1, Output: linOutput{rev: 2, committed: true}},
		{Input: linInput{kind: linPut, key: "b"}, Call: 2, Return: 3, Output: linOutput{rev: 1, committed: true}},
	}
	if porcupine.CheckOperations(linModel, history) != true {
		t.Error("two keys written once each: porcupine refused")
	}
	if err := checkRevisions(history, 2); err == nil {
		t.Error("checkRevisions accepted revisions out of real-time order across keys")
	}
}
