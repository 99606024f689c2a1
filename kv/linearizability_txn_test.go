package kv_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/anishathalye/porcupine"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
)

// The whole-store linearizability test extends the per-key one
// (linearizability_test.go) to what ties keys together: transactions
// over several keys with an Else branch, fenced writes against a lock
// key that clients acquire, release and steal, and scans that read every
// key at once. Its model is the whole store (the workload's keys and the
// revision), not partitioned, and it checks that every committed write
// takes the next revision in the linearization order, which also
// accounts for writes to keys it does not model (bulk transactions).

// gKeys are the keys the model tracks; gLock is the lock the fenced
// writes are fenced by. A scan of [gScanStart, gScanEnd) reads them all
// and nothing else.
var gKeys = []string{"k0", "k1", "k2", "lock"}

const (
	gLock                = 3
	gScanStart, gScanEnd = "k", "m"
)

func gIndex(key string) int {
	for i, k := range gKeys {
		if k == key {
			return i
		}
	}
	panic("key not modelled: " + key)
}

type gKind uint8

const (
	gGet   gKind = iota
	gScan        // ScanErr over [gScanStart, gScanEnd)
	gWrite       // one put, add or delete: Put, Add, Delete, or a FencedWriter's
	gTxn         // a Txn (fenced when fence is set), one compare, Then and Else
	gBulk        // a transaction of puts to keys the model does not track
)

// gOp is one operation of a write or a transaction.
type gOp struct {
	kind  record.Kind
	key   string
	value string
	delta int64
}

func (o gOp) op() kv.Op {
	switch o.kind {
	case record.KindPut:
		return kv.PutOp([]byte(o.key), []byte(o.value))
	case record.KindAdd:
		return kv.AddOp([]byte(o.key), o.delta)
	}
	return kv.DeleteOp([]byte(o.key))
}

type gInput struct {
	kind  gKind
	key   string // get
	op    gOp    // write
	cmp   *kv.Compare
	then  []gOp
	els   []gOp
	fence *kv.Fence
	bulk  []kv.Op
	// what the client meant, for the coverage report: "acquire",
	// "release", "steal" or "".
	role string
}

type gEntry struct {
	key, value     string
	create, modRev kv.Revision
	version        int64
}

const errFenced linErr = errNotInteger + 1

type gOutput struct {
	err       linErr
	committed bool
	rev       kv.Revision // committed at; for a txn that committed nothing, the store's revision
	ok        bool        // txn: the compare held
	n         int64       // add
	found     bool        // get
	entry     gEntry      // get
	scan      []gEntry
}

type gKey struct {
	exists         bool
	value          string
	create, modRev kv.Revision
	version        int64
}

// gState is the model: the revision of the last committed record and
// the modelled keys. It is comparable, as porcupine's cache wants.
type gState struct {
	rev  kv.Revision
	keys [4]gKey
}

// gApply applies ops at revision rev to keys, each seeing the ones
// before; errNotInteger, and keys unchanged, when an add cannot apply.
func gApply(keys [4]gKey, ops []gOp, rev kv.Revision) ([4]gKey, int64, linErr) {
	var n int64
	for _, o := range ops {
		k := &keys[gIndex(o.key)]
		switch o.kind {
		case record.KindDelete:
			*k = gKey{}
			continue
		case record.KindAdd:
			var cur int64
			if k.exists {
				v, err := strconv.ParseInt(k.value, 10, 64)
				if err != nil {
					return keys, 0, errNotInteger
				}
				cur = v
			}
			n = cur + o.delta
			o.value = strconv.FormatInt(n, 10)
		}
		if !k.exists {
			*k = gKey{exists: true, create: rev}
		}
		k.value, k.modRev = o.value, rev
		k.version++
	}
	return keys, n, errNone
}

func gHolds(s *gState, c *kv.Compare) bool {
	k := s.keys[gIndex(string(c.Key))]
	rel := func(sign int) bool {
		switch c.Cmp {
		case kv.Equal:
			return sign == 0
		case kv.NotEqual:
			return sign != 0
		case kv.Less:
			return sign < 0
		}
		return sign > 0
	}
	var n int64
	switch c.Target {
	case record.TargetValue:
		if !k.exists {
			return c.Cmp == kv.NotEqual
		}
		return rel(strings.Compare(k.value, string(c.Value)))
	case record.TargetExists:
		if k.exists {
			n = 1
		}
	case record.TargetCreateRev:
		n = int64(k.create)
	case record.TargetModRev:
		n = int64(k.modRev)
	case record.TargetVersion:
		n = k.version
	}
	switch {
	case n < c.Num:
		return rel(-1)
	case n > c.Num:
		return rel(1)
	}
	return rel(0)
}

func (k gKey) entry(key string) gEntry {
	return gEntry{key: key, value: k.value, create: k.create, modRev: k.modRev, version: k.version}
}

func gStep(state, input, output any) (bool, any) {
	s, in, out := state.(gState), input.(gInput), output.(gOutput)
	switch in.kind {
	case gGet:
		k := s.keys[gIndex(in.key)]
		if !k.exists {
			return out.err == errNotFound && !out.found, s
		}
		return out.err == errNone && out.found && out.entry == k.entry(in.key), s
	case gScan:
		var want []gEntry
		for i, k := range s.keys {
			if k.exists {
				want = append(want, k.entry(gKeys[i]))
			}
		}
		if out.err != errNone || len(out.scan) != len(want) {
			return false, s
		}
		for i := range want {
			if out.scan[i] != want[i] {
				return false, s
			}
		}
		return true, s
	case gBulk:
		ok := out.err == errNone && out.committed && out.rev == s.rev+1
		s.rev++
		return ok, s
	}
	// A write or a transaction: what the store must have answered.
	var (
		want   linErr
		ops    []gOp
		ok     = true
		keys   = s.keys
		n      int64
		commit bool
	)
	next := s.rev + 1
	switch {
	case in.fence != nil && !fenceHolds(&s, in.fence):
		want = errFenced
	case in.kind == gWrite:
		ops = []gOp{in.op}
		if in.op.kind == record.KindDelete && !s.keys[gIndex(in.op.key)].exists {
			want = errNotFound // Delete and FencedWriter.Delete
			break
		}
		keys, n, want = gApply(keys, ops, next)
		commit = want == errNone
	default:
		if in.cmp != nil {
			ok = gHolds(&s, in.cmp)
		}
		ops = in.then
		if !ok {
			ops = in.els
		}
		if len(ops) > 0 {
			keys, _, want = gApply(keys, ops, next)
			commit = want == errNone
		}
	}
	if out.err != want || out.committed != commit {
		return false, s
	}
	if want != errNone {
		return true, s
	}
	if in.kind == gTxn && out.ok != ok {
		return false, s
	}
	if !commit {
		return out.rev == s.rev, s // a branch without operations commits nothing
	}
	if out.rev != next || (in.kind == gWrite && in.op.kind == record.KindAdd && out.n != n) {
		return false, s
	}
	return true, gState{rev: next, keys: keys}
}

func fenceHolds(s *gState, f *kv.Fence) bool {
	l := s.keys[gLock]
	cur := l.create
	if f.By == kv.FenceModRev {
		cur = l.modRev
	}
	return l.exists && cur == f.Token
}

// gModel is the model of a store whose revision is rev0 and whose
// modelled keys are absent when the history starts.
func gModel(rev0 kv.Revision) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return gState{rev: rev0} },
		Step: gStep,
		DescribeOperation: func(input, output any) string {
			in, out := input.(gInput), output.(gOutput)
			var b strings.Builder
			switch in.kind {
			case gGet:
				fmt.Fprintf(&b, "get(%s)", in.key)
			case gScan:
				b.WriteString("scan")
			case gBulk:
				fmt.Fprintf(&b, "bulk(%d)", len(in.bulk))
			case gWrite:
				fmt.Fprintf(&b, "%v(%s %q %d)", in.op.kind, in.op.key, in.op.value, in.op.delta)
			case gTxn:
				fmt.Fprintf(&b, "txn[%s]", in.role)
				if in.cmp != nil {
					fmt.Fprintf(&b, " if %s t%d c%d %q %d", in.cmp.Key, in.cmp.Target, in.cmp.Cmp, in.cmp.Value, in.cmp.Num)
				}
				fmt.Fprintf(&b, " then %v else %v", in.then, in.els)
			}
			if in.fence != nil {
				fmt.Fprintf(&b, " fenced by %d/%d", in.fence.Token, in.fence.By)
			}
			fmt.Fprintf(&b, " -> err%d c%v r%d ok%v n%d", out.err, out.committed, out.rev, out.ok, out.n)
			if in.kind == gGet {
				fmt.Fprintf(&b, " %+v", out.entry)
			}
			if in.kind == gScan {
				fmt.Fprintf(&b, " %+v", out.scan)
			}
			return b.String()
		},
		DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(gState)) },
	}
}

func gClassify(err error) (linErr, bool) {
	if errors.Is(err, kv.ErrFenced) {
		return errFenced, true
	}
	return classify(err)
}

func gEntryOf(e kv.Entry) gEntry {
	return gEntry{key: string(e.Key), value: string(e.Value), create: e.CreateRev, modRev: e.ModRev, version: e.Version}
}

// gDo runs in against s.
func gDo(s *kv.Store, in gInput) (gOutput, error) {
	var out gOutput
	var err error
	switch in.kind {
	case gGet:
		var e kv.Entry
		if e, err = s.Get([]byte(in.key)); err == nil {
			out.found, out.entry = true, gEntryOf(e)
		}
	case gScan:
		for e, serr := range s.ScanErr([]byte(gScanStart), []byte(gScanEnd)) {
			if serr != nil {
				return out, serr
			}
			out.scan = append(out.scan, gEntryOf(e))
		}
	case gBulk:
		var res kv.TxnResult
		res, err = s.Txn(kv.Txn{Then: in.bulk})
		out.committed, out.rev = res.Committed, res.Revision
	case gWrite:
		k := []byte(in.op.key)
		if in.fence != nil {
			fw := s.Fenced(*in.fence)
			switch in.op.kind {
			case record.KindPut:
				out.rev, err = fw.Put(k, []byte(in.op.value))
			case record.KindAdd:
				out.n, out.rev, err = fw.Add(k, in.op.delta)
			default:
				out.rev, err = fw.Delete(k)
			}
		} else {
			switch in.op.kind {
			case record.KindPut:
				out.rev, err = s.Put(k, []byte(in.op.value))
			case record.KindAdd:
				out.n, out.rev, err = s.Add(k, in.op.delta)
			default:
				out.rev, err = s.Delete(k)
			}
		}
		out.committed = err == nil
	case gTxn:
		t := kv.Txn{}
		if in.cmp != nil {
			t.If = []kv.Compare{*in.cmp}
		}
		for _, o := range in.then {
			t.Then = append(t.Then, o.op())
		}
		for _, o := range in.els {
			t.Else = append(t.Else, o.op())
		}
		var res kv.TxnResult
		if in.fence != nil {
			res, err = s.Fenced(*in.fence).Txn(t)
		} else {
			res, err = s.Txn(t)
		}
		out.ok, out.committed, out.rev = res.Succeeded, res.Committed, res.Revision
	}
	var ok bool
	if out.err, ok = gClassify(err); !ok {
		return out, fmt.Errorf("%+v: %w", in, err)
	}
	if out.err != errNone {
		if out.committed || out.rev != 0 {
			return out, fmt.Errorf("%+v failed with %v but reports revision %d", in, err, out.rev)
		}
	}
	return out, nil
}

// gRecorder records the history of concurrent clients.
type gRecorder struct {
	clock linClock
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (r *gRecorder) run(s *kv.Store, client int, in gInput) (gOutput, error) {
	call := r.clock.now()
	out, err := gDo(s, in)
	ret := r.clock.now()
	if err != nil {
		return out, err
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
	return out, nil
}

// gClient runs ops random operations. It holds a token when it acquired
// the lock, and fences its writes with it, or with a stale or made-up
// one when it has none, so that fences both hold and fail.
func gClient(s *kv.Store, r *gRecorder, client, ops int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	var token kv.Revision
	last := map[string]gEntry{}
	key := func() string { return gKeys[rng.IntN(gLock)] }
	value := func(i int) string {
		if rng.IntN(8) == 0 {
			return fmt.Sprintf("s%d.%d", client, i)
		}
		return strconv.Itoa(client*1_000_000 + i*10)
	}
	randOp := func(i int) gOp {
		switch rng.IntN(3) {
		case 0:
			return gOp{kind: record.KindPut, key: key(), value: value(i)}
		case 1:
			return gOp{kind: record.KindAdd, key: key(), delta: int64(rng.IntN(5) + 1)}
		}
		return gOp{kind: record.KindDelete, key: key()}
	}
	randOps := func(i, max int) []gOp {
		ops := make([]gOp, rng.IntN(max+1))
		for j := range ops {
			ops[j] = randOp(i)
		}
		return ops
	}
	randCmp := func() *kv.Compare {
		k := key()
		var c kv.Compare
		switch rng.IntN(3) {
		case 0:
			c = kv.CompareValue([]byte(k), kv.Equal, []byte(last[k].value))
		case 1:
			c = kv.CompareModRev([]byte(k), kv.Equal, last[k].modRev)
		default:
			c = kv.Exists([]byte(k))
		}
		return &c
	}
	fence := func() *kv.Fence {
		f := kv.Fence{Key: []byte("lock"), Token: token}
		if token == 0 || rng.IntN(6) == 0 {
			f.Token = last["lock"].create // maybe stale, maybe someone else's
		}
		if rng.IntN(6) == 0 {
			f.By, f.Token = kv.FenceModRev, last["lock"].modRev
		}
		return &f
	}
	release := func() gInput {
		c := kv.CompareCreateRev([]byte("lock"), kv.Equal, token)
		return gInput{kind: gTxn, role: "release", cmp: &c, then: []gOp{{kind: record.KindDelete, key: "lock"}}}
	}
	for i := range ops {
		var in gInput
		switch p := rng.IntN(100); {
		case token != 0 && p < 15:
			// A holder releases soon, before a thief takes the lock
			// from under it: else "release ok=true" is rare enough
			// that a run can miss it (gCoverage).
			in = release()
		case p < 18:
			in = gInput{kind: gGet, key: gKeys[rng.IntN(len(gKeys))]}
		case p < 26:
			in = gInput{kind: gScan}
		case p < 40:
			in = gInput{kind: gWrite, op: randOp(i)}
		case p < 54:
			in = gInput{kind: gTxn, cmp: randCmp(), then: randOps(i, 2), els: randOps(i, 2)}
		case p < 62:
			c := kv.Absent([]byte("lock"))
			in = gInput{kind: gTxn, role: "acquire", cmp: &c,
				then: []gOp{{kind: record.KindPut, key: "lock", value: fmt.Sprintf("c%d.%d", client, i)}}}
		case p < 66:
			in = release()
		case p < 69:
			in = gInput{kind: gWrite, role: "steal", op: gOp{kind: record.KindDelete, key: "lock"}}
		case p < 85:
			in = gInput{kind: gWrite, op: randOp(i), fence: fence()}
		default:
			in = gInput{kind: gTxn, cmp: randCmp(), then: randOps(i, 2), els: randOps(i, 2), fence: fence()}
		}
		out, err := r.run(s, client, in)
		if err != nil {
			return err
		}
		switch {
		case in.kind == gGet && out.found:
			last[in.key] = out.entry
		case in.kind == gGet:
			delete(last, in.key)
		case in.kind == gScan:
			clear(last)
			for _, e := range out.scan {
				last[e.key] = e
			}
		case in.role == "acquire" && out.ok:
			token = out.rev
		case in.role == "release" && out.ok:
			token = 0
		}
	}
	return nil
}

// gCoverage fails the test when the history misses an outcome it is
// meant to hold.
func gCoverage(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	seen := map[string]int{}
	for _, op := range history {
		in, out := op.Input.(gInput), op.Output.(gOutput)
		var name string
		switch {
		case in.kind == gScan:
			name = "scan"
		case in.kind == gBulk:
			name = "bulk"
		case in.role != "":
			name = fmt.Sprintf("%s ok=%v", in.role, out.committed)
		case in.fence != nil && out.err == errFenced:
			name = "fenced off"
		case in.fence != nil && out.committed:
			name = "fenced committed"
		case in.kind == gTxn && out.committed:
			name = fmt.Sprintf("txn then=%v", out.ok)
		default:
			continue
		}
		seen[name]++
	}
	t.Logf("outcomes: %v", seen)
	for _, want := range []string{"scan", "txn then=true", "txn then=false", "fenced off", "fenced committed",
		"acquire ok=true", "acquire ok=false", "release ok=true", "steal ok=true"} {
		if seen[want] == 0 {
			t.Errorf("no %q in the history: the workload misses a case", want)
		}
	}
}

func gCheck(t *testing.T, history []porcupine.Operation, rev0 kv.Revision) {
	t.Helper()
	model := gModel(rev0)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, 60*time.Second)
	t.Logf("porcupine: %v on %d operations in %v", res, len(history), time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Illegal:
		t.Errorf("history of %d operations is not linearizable", len(history))
		for _, part := range info.PartialLinearizationsOperations() {
			for _, lin := range part {
				var ops []string
				for _, op := range lin[max(0, len(lin)-10):] {
					ops = append(ops, model.DescribeOperation(op.Input, op.Output))
				}
				t.Logf("end of the longest linearizable prefix (%d operations):\n%s", len(lin), strings.Join(ops, "\n"))
			}
		}
	case porcupine.Unknown:
		t.Errorf("porcupine did not decide within its time limit on %d operations", len(history))
	}
}

// gRun runs the clients (and bulk, when set, on a goroutine of its own)
// against s, calls done (when set) once they are all done, then closes
// s, reopens dir, reads every modelled key and scans once more, and
// returns the history.
func gRun(t *testing.T, s *kv.Store, opts kv.Options, dir string, clients, ops int, bulk []gInput, seed uint64, done func(*kv.Store)) []porcupine.Operation {
	t.Helper()
	rec := &gRecorder{}
	var wg sync.WaitGroup
	errc := make(chan error, clients+1)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := gClient(s, rec, c, ops, seed); err != nil {
				errc <- err
			}
		}()
	}
	if len(bulk) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, in := range bulk {
				if _, err := rec.run(s, clients, in); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if done != nil {
		done(s)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := kv.Open(dir, &opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	for _, k := range gKeys {
		if _, err := rec.run(r, clients+1, gInput{kind: gGet, key: k}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.run(r, clients+1, gInput{kind: gScan}); err != nil {
		t.Fatal(err)
	}
	return rec.ops
}

// TestLinearizableTxnFenceScan checks concurrent histories of
// multi-key transactions with Else branches, lock acquisition, release
// and theft, fenced writes and fenced transactions, and scans, against
// the whole-store model.
func TestLinearizableTxnFenceScan(t *testing.T) {
	tests := []struct {
		name string
		opts kv.Options
		os   bool
	}{
		{name: "mem always", opts: kv.Options{SegmentSize: 2 << 10, CheckpointBytes: 8 << 10}},
		{name: "mem never", opts: kv.Options{SegmentSize: 2 << 10, CheckpointBytes: 8 << 10, Sync: kv.Never}},
		{name: "os always", opts: kv.Options{SegmentSize: 4 << 10, CheckpointBytes: 16 << 10}, os: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, dir := tc.opts, t.TempDir()
			if !tc.os {
				opts.FS, dir = vfs.NewMem(), "/data"
			}
			s, err := kv.Open(dir, &opts)
			if err != nil {
				t.Fatal(err)
			}
			seed := uint64(time.Now().UnixNano())
			history := gRun(t, s, opts, dir, 6, 200, nil, seed, nil)
			gCheck(t, history, 0)
			gCoverage(t, history)
			if t.Failed() {
				t.Logf("seed %d", seed)
			}
		})
	}
}

// TestLinearizableBigStore runs the whole-store history on a store big
// enough that its reopen builds the ordered tree in the background
// (record.Map.BuildAsync: 70,000 keys, past the 64K from which it does),
// so that the first scans and writes race the build, and with enough
// churn that the arena evacuates chunks meanwhile: a bulk writer
// rewrites three keys in four of the store once, in transactions of 500,
// which leaves the chunks the reopen filled three quarters dead. The
// evacuation is seen from outside: the entry of a key nobody wrote moves
// (its value's address changes, its revisions do not), which only an
// evacuation does.
func TestLinearizableBigStore(t *testing.T) {
	const keys, batch = 70_000, 1000
	fillKey := func(i int) []byte { return fmt.Appendf(nil, "fill/%05d", i) }
	mem := vfs.NewMem()
	opts := kv.Options{FS: mem}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < keys; b += batch {
		var ops []kv.Op
		for i := b; i < b+batch; i++ {
			ops = append(ops, kv.PutOp(fillKey(i), fmt.Appendf(nil, "value %09d", i)))
		}
		if _, err := s.Txn(kv.Txn{Then: ops}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = kv.Open("/data", &opts) // builds the tree in the background
	if err != nil {
		t.Fatal(err)
	}
	rev0 := s.Revision()
	// The bulk writer's transactions, and the keys nobody writes: where
	// their entries are now.
	var bulk []gInput
	var ops []kv.Op
	for i := range keys {
		if i%4 == 0 {
			continue
		}
		ops = append(ops, kv.PutOp(fillKey(i), fmt.Appendf(nil, "VALUE %09d", i)))
		if len(ops) == 500 {
			bulk = append(bulk, gInput{kind: gBulk, bulk: ops})
			ops = nil
		}
	}
	if len(ops) > 0 {
		bulk = append(bulk, gInput{kind: gBulk, bulk: ops})
	}
	type where struct {
		at  uintptr
		rev kv.Revision
	}
	still := map[int]where{}
	for i := 0; i < keys; i += 64 { // i%4 == 0: never written
		e, err := s.Get(fillKey(i))
		if err != nil {
			t.Fatal(err)
		}
		still[i] = where{uintptr(unsafe.Pointer(unsafe.SliceData(e.Value))), e.ModRev}
	}
	moved := 0
	evacuated := func(s *kv.Store) {
		for i, w := range still {
			e, err := s.Get(fillKey(i))
			if err != nil || e.ModRev != w.rev {
				t.Errorf("key %d, written by nobody: modified at %d, %v; want %d", i, e.ModRev, err, w.rev)
				continue
			}
			if uintptr(unsafe.Pointer(unsafe.SliceData(e.Value))) != w.at {
				moved++
			}
		}
	}
	seed := uint64(time.Now().UnixNano())
	history := gRun(t, s, opts, "/data", 6, 250, bulk, seed, evacuated)
	gCheck(t, history, rev0)
	gCoverage(t, history)
	t.Logf("%d of %d entries nobody wrote were moved by the arena's evacuation", moved, len(still))
	if moved == 0 {
		t.Errorf("no entry of the %d sampled moved: the arena never evacuated a chunk the reopen filled", len(still))
	}
	if t.Failed() {
		t.Logf("seed %d", seed)
	}
}

// TestWholeStoreCheckerFails feeds the whole-store model hand-built
// histories: the broken ones must be refused, the sound one accepted.
func TestWholeStoreCheckerFails(t *testing.T) {
	type op struct {
		call, ret int64
		in        gInput
		out       gOutput
	}
	put := func(call, ret int64, k, v string, rev kv.Revision) op {
		return op{call, ret, gInput{kind: gWrite, op: gOp{kind: record.KindPut, key: k, value: v}}, gOutput{committed: true, rev: rev}}
	}
	acquire := func(call, ret int64, ok bool, rev kv.Revision) op {
		c := kv.Absent([]byte("lock"))
		return op{call, ret, gInput{kind: gTxn, role: "acquire", cmp: &c, then: []gOp{{kind: record.KindPut, key: "lock", value: "me"}}},
			gOutput{ok: ok, committed: ok, rev: rev}}
	}
	steal := func(call, ret int64, rev kv.Revision) op {
		return op{call, ret, gInput{kind: gWrite, op: gOp{kind: record.KindDelete, key: "lock"}}, gOutput{committed: true, rev: rev}}
	}
	fenced := func(call, ret int64, token kv.Revision, k, v string, out gOutput) op {
		return op{call, ret, gInput{kind: gWrite, op: gOp{kind: record.KindPut, key: k, value: v},
			fence: &kv.Fence{Key: []byte("lock"), Token: token}}, out}
	}
	txn := func(call, ret int64, cmpValue string, out gOutput) op {
		c := kv.CompareValue([]byte("k0"), kv.Equal, []byte(cmpValue))
		return op{call, ret, gInput{kind: gTxn, cmp: &c,
			then: []gOp{{kind: record.KindPut, key: "k1", value: "then"}},
			els:  []gOp{{kind: record.KindPut, key: "k2", value: "else"}, {kind: record.KindAdd, key: "k2", delta: 1}}}, out}
	}
	scan := func(call, ret int64, es ...gEntry) op {
		return op{call, ret, gInput{kind: gScan}, gOutput{scan: es}}
	}
	bulk := func(call, ret int64, rev kv.Revision) op {
		return op{call, ret, gInput{kind: gBulk}, gOutput{committed: true, rev: rev}}
	}
	tests := []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{name: "sound", want: porcupine.Ok, ops: []op{
			put(0, 1, "k0", "a", 1), acquire(2, 3, true, 2), fenced(4, 5, 2, "k1", "f", gOutput{committed: true, rev: 3}),
			steal(6, 7, 4), fenced(8, 9, 2, "k1", "g", gOutput{err: errFenced}), bulk(10, 11, 5),
			txn(12, 13, "a", gOutput{ok: true, committed: true, rev: 6}),
			scan(14, 15, gEntry{"k0", "a", 1, 1, 1}, gEntry{"k1", "then", 3, 6, 2}),
		}},
		{name: "fenced write after the lock was stolen", want: porcupine.Illegal, ops: []op{
			acquire(0, 1, true, 1), steal(2, 3, 2), fenced(4, 5, 1, "k1", "f", gOutput{committed: true, rev: 3}),
		}},
		{name: "fenced write after the lock was taken over", want: porcupine.Illegal, ops: []op{
			acquire(0, 1, true, 1), steal(2, 3, 2), acquire(4, 5, true, 3), fenced(6, 7, 1, "k1", "f", gOutput{committed: true, rev: 4}),
		}},
		{name: "fence refused while it holds", want: porcupine.Illegal, ops: []op{
			acquire(0, 1, true, 1), fenced(2, 3, 1, "k1", "f", gOutput{err: errFenced}),
		}},
		{name: "two acquisitions", want: porcupine.Illegal, ops: []op{
			acquire(0, 10, true, 1), acquire(1, 9, true, 2),
		}},
		{name: "then taken on a false compare", want: porcupine.Illegal, ops: []op{
			put(0, 1, "k0", "a", 1), txn(2, 3, "b", gOutput{ok: true, committed: true, rev: 2}),
		}},
		{name: "else that cannot apply reported committed", want: porcupine.Illegal, ops: []op{
			put(0, 1, "k2", "x", 1), txn(2, 3, "b", gOutput{ok: false, committed: true, rev: 2}),
		}},
		{name: "scan misses a committed key", want: porcupine.Illegal, ops: []op{
			put(0, 1, "k0", "a", 1), put(2, 3, "k1", "b", 2), scan(4, 5, gEntry{"k1", "b", 2, 2, 1}),
		}},
		{name: "scan sees half of a transaction", want: porcupine.Illegal, ops: []op{
			txn(0, 10, "z", gOutput{committed: false, err: errNotInteger}),
			scan(1, 2, gEntry{"k2", "else", 1, 1, 1}),
		}},
		{name: "revision skipped", want: porcupine.Illegal, ops: []op{
			put(0, 1, "k0", "a", 1), put(2, 3, "k1", "b", 3),
		}},
		{name: "bulk write at a revision taken", want: porcupine.Illegal, ops: []op{
			put(0, 1, "k0", "a", 1), bulk(2, 3, 1),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, o := range tc.ops {
				history = append(history, porcupine.Operation{ClientId: i, Input: o.in, Call: o.call, Output: o.out, Return: o.ret})
			}
			if got := porcupine.CheckOperationsTimeout(gModel(0), history, 5*time.Second); got != tc.want {
				t.Errorf("porcupine: %v, want %v", got, tc.want)
			}
		})
	}
}
