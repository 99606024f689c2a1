package kvraft

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// The crash checker: a workload of appends, deletes from the front (a
// compaction) and from the back (a conflict with the leader) and term
// updates runs on a store on kv's in-memory file system, and at every
// change the store makes to its files (before the change) and after
// every acknowledged operation, the state a crash leaves is recovered
// and checked against the model of the workload:
//
//   - no log an acknowledged operation left is lost, and no term
//     acknowledged is lost;
//   - no log an acknowledged DeleteRange removed reappears;
//   - a batch in flight is all there or none of it; every log has its
//     term and data;
//   - indexes are contiguous, and FirstIndex and LastIndex after Open
//     are the smallest and largest stored.
//
// A crash state is a power loss's (MemFS.CrashClone: nothing unsynced
// survives) at every change, and also a process crash's (MemFS.Clone)
// after each acknowledgement.

// crashOp is one operation of the workload.
type crashOp struct {
	kind   string // "append", "front", "back", "term"
	lo, hi uint64 // the indexes appended or deleted
	term   uint64 // the term of appended logs, or the term set
}

// modelState is the store's state after some prefix of the workload.
type modelState struct {
	logs map[uint64]uint64 // index → term
	term uint64
}

func (m modelState) clone() modelState {
	c := modelState{logs: make(map[uint64]uint64, len(m.logs)), term: m.term}
	for i, t := range m.logs {
		c.logs[i] = t
	}
	return c
}

func logData(index, term uint64) []byte { return []byte(fmt.Sprintf("cmd %d@%d", index, term)) }

// genWorkload returns n operations and the model's state after each
// prefix (states[0] is the empty store).
func genWorkload(seed uint64, n int) ([]crashOp, []modelState) {
	rng := rand.New(rand.NewPCG(seed, 0))
	st := modelState{logs: map[uint64]uint64{}}
	states := []modelState{st.clone()}
	var ops []crashOp
	first, last, term, next := uint64(0), uint64(0), uint64(1), uint64(1)
	for len(ops) < n {
		var op crashOp
		switch r := rng.IntN(10); {
		case r < 5 || last == 0:
			k := 1 + rng.Uint64N(12)
			op = crashOp{kind: "append", lo: next, hi: next + k - 1, term: term}
			for i := op.lo; i <= op.hi; i++ {
				st.logs[i] = term
			}
			if first == 0 {
				first = op.lo
			}
			last, next = op.hi, op.hi+1
		case r < 7:
			hi := first + rng.Uint64N(last-first+1)
			if rng.IntN(8) == 0 {
				hi = last // the whole log, as after installing a snapshot
			}
			op = crashOp{kind: "front", lo: first, hi: hi}
		case r < 9:
			lo := first + rng.Uint64N(last-first+1)
			op = crashOp{kind: "back", lo: lo, hi: last}
			next = lo // the leader's entries replace the cut ones
			term++    // in a later term
		default:
			term++
			op = crashOp{kind: "term", term: term}
			st.term = term
		}
		if op.kind == "front" || op.kind == "back" {
			for i := op.lo; i <= op.hi; i++ {
				delete(st.logs, i)
			}
			first, last = 0, 0
			for i := range st.logs {
				if first == 0 || i < first {
					first = i
				}
				last = max(last, i)
			}
			if last == 0 {
				next = max(next, op.hi+1)
			}
		}
		ops = append(ops, op)
		states = append(states, st.clone())
	}
	return ops, states
}

// workStore is what the workload drives: a Store, or a broken one.
type workStore interface {
	StoreLogs([]*raft.Log) error
	DeleteRange(min, max uint64) error
	SetUint64(key []byte, v uint64) error
	Close() error
}

// storeVariant opens the store under test on fs.
type storeVariant struct {
	name string
	open func(fs vfs.FS) (workStore, error)
}

// crashKVOptions keep the file system small: segments of 16 KiB, so that
// the workload rotates and checkpoints, and no preallocation.
func crashKVOptions(fs vfs.FS) kv.Options {
	return kv.Options{FS: fs, SegmentSize: 16 << 10, CheckpointBytes: 16 << 10, NoPreallocate: true}
}

var goodStore = storeVariant{"kvraft", func(fs vfs.FS) (workStore, error) {
	return Open("data", &Options{KV: crashKVOptions(fs), DeleteBatch: 4})
}}

// runCrashCheck runs the workload of seed on v and checks every crash
// state; it returns the first violation, or nil. checked counts the
// crash states it recovered.
func runCrashCheck(seed uint64, nops int, v storeVariant) (checked int, _ error) {
	ops, states := genWorkload(seed, nops)
	mem := vfs.NewMem()
	var acked, issued atomic.Int64
	var mu sync.Mutex
	var violation error
	// check takes a crash state with clone and checks it. A state taken
	// on a background goroutine of the store (a checkpoint) may be taken
	// while the workload goes on: the operations acknowledged before the
	// clone are at least a (read before), and those issued at most i
	// (read after), and the state must be one that some k in a..i
	// allows, k acknowledged and the next in flight if k < i.
	check := func(clone func() *vfs.MemFS, model string) {
		mu.Lock()
		defer mu.Unlock()
		if violation != nil {
			return
		}
		a := int(acked.Load())
		fs := clone()
		i := int(issued.Load())
		checked++
		var first error
		for k := a; k <= i; k++ {
			err := checkCrashState(fs.Clone(), ops, states, k, k < i)
			if err == nil {
				return
			}
			if first == nil {
				first = err
			}
		}
		violation = fmt.Errorf("seed %d, %s crash with %d operations acknowledged%s: %w",
			seed, model, a, inFlight(ops, a, i > a), first)
	}
	fs := &vfs.Inject{FS: mem, Rule: func(op vfs.Op) error {
		if op.Kind.Mutates() {
			check(mem.CrashClone, "power-loss before "+op.Kind.String()+" "+op.Path)
		}
		return nil
	}}
	s, err := v.open(fs)
	if err != nil {
		return checked, err
	}
	defer s.Close()
	for k, op := range ops {
		issued.Store(int64(k + 1))
		var err error
		switch op.kind {
		case "append":
			var logs []*raft.Log
			for i := op.lo; i <= op.hi; i++ {
				logs = append(logs, &raft.Log{Index: i, Term: op.term, Data: logData(i, op.term), AppendedAt: time.Unix(int64(i), 0)})
			}
			err = s.StoreLogs(logs)
		case "front", "back":
			err = s.DeleteRange(op.lo, op.hi)
		case "term":
			err = s.SetUint64([]byte("CurrentTerm"), op.term)
		}
		if err != nil {
			return checked, fmt.Errorf("operation %d (%s): %w", k+1, op.kind, err)
		}
		acked.Store(int64(k + 1))
		check(mem.CrashClone, "power-loss")
		check(mem.Clone, "process")
		mu.Lock()
		v := violation
		mu.Unlock()
		if v != nil {
			return checked, v
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return checked, violation
}

func inFlight(ops []crashOp, a int, flying bool) string {
	if !flying {
		return ""
	}
	op := ops[a]
	if op.kind == "term" {
		return fmt.Sprintf(", term %d in flight", op.term)
	}
	return fmt.Sprintf(", %s %d..%d in flight", op.kind, op.lo, op.hi)
}

// checkCrashState recovers fs and checks it against the model: a
// operations acknowledged, and ops[a] in flight if flying.
func checkCrashState(fs *vfs.MemFS, ops []crashOp, states []modelState, a int, flying bool) error {
	s, err := Open("data", &Options{KV: kv.Options{FS: fs}})
	if err != nil {
		return fmt.Errorf("recovery failed: %w", err)
	}
	defer s.Close()
	// Every log key the store holds, read through GetLog.
	var got []uint64
	for e, err := range s.kv.ScanView(logKey(0), logEnd) {
		if err != nil {
			return err
		}
		i, ok := keyIndex(e.Key)
		if !ok {
			return fmt.Errorf("log key %x", e.Key)
		}
		got = append(got, i)
	}
	acked := states[a]
	var next modelState
	var op crashOp
	if flying {
		next, op = states[a+1], ops[a]
	}
	var errs []string
	inNext := func(i, term uint64) bool {
		t, ok := next.logs[i]
		return flying && ok && t == term
	}
	for _, i := range got {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			errs = append(errs, fmt.Sprintf("log %d: %v", i, err))
			continue
		}
		if string(l.Data) != string(logData(i, l.Term)) {
			errs = append(errs, fmt.Sprintf("log %d: data %q", i, l.Data))
		}
		if t, ok := acked.logs[i]; ok && t == l.Term || inNext(i, l.Term) {
			continue
		}
		reason := "never written"
		for k := a; k >= 0; k-- {
			if t, ok := states[k].logs[i]; ok && t == l.Term {
				reason = fmt.Sprintf("reappears after an acknowledged DeleteRange (operation %d)", k+1)
				break
			}
		}
		errs = append(errs, fmt.Sprintf("log %d (term %d) %s", i, l.Term, reason))
	}
	for i, t := range acked.logs {
		if slices.Contains(got, i) {
			continue
		}
		if flying && (op.kind == "front" || op.kind == "back") && i >= op.lo && i <= op.hi {
			continue // its DeleteRange is in flight
		}
		errs = append(errs, fmt.Sprintf("acknowledged log %d (term %d) lost", i, t))
	}
	if flying && op.kind == "append" {
		n := 0
		for i := op.lo; i <= op.hi; i++ {
			if t, ok := acked.logs[i]; !(ok && t == op.term) && slices.Contains(got, i) {
				n++
			}
		}
		if n != 0 && n != int(op.hi-op.lo+1) {
			errs = append(errs, fmt.Sprintf("batch %d..%d torn: %d of its logs", op.lo, op.hi, n))
		}
	}
	for k := 1; k < len(got); k++ {
		if got[k] != got[k-1]+1 {
			errs = append(errs, fmt.Sprintf("gap: %d then %d", got[k-1], got[k]))
		}
	}
	wantFirst, wantLast := uint64(0), uint64(0)
	if len(got) > 0 {
		wantFirst, wantLast = got[0], got[len(got)-1]
	}
	if f, l := getBoundsErr(s); f != wantFirst || l != wantLast {
		errs = append(errs, fmt.Sprintf("FirstIndex, LastIndex = %d, %d; the logs are %d..%d", f, l, wantFirst, wantLast))
	}
	term, err := s.GetUint64([]byte("CurrentTerm"))
	if errors.Is(err, ErrKeyNotFound) {
		term, err = 0, nil
	}
	if err != nil {
		errs = append(errs, fmt.Sprintf("term: %v", err))
	} else if term != acked.term && !(flying && term == next.term) {
		errs = append(errs, fmt.Sprintf("term %d, acknowledged %d", term, acked.term))
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func getBoundsErr(s *Store) (uint64, uint64) {
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	return f, l
}

var long = flag.Bool("long", false, "run the crash checks on 60 workloads of 300 operations (KV_RAFT_LONG=1 .ci/run)")

func TestCrash(t *testing.T) {
	seeds, nops := 6, 120
	switch {
	case *long:
		seeds, nops = 60, 300
	case testing.Short():
		seeds, nops = 2, 60
	}
	for seed := range uint64(seeds) {
		checked, err := runCrashCheck(seed, nops, goodStore)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %d crash states recovered and checked", seed, checked)
	}
}

// Broken stores, each of which the checker must catch.

// neverSync acknowledges writes before they are durable (kv.Never).
var neverSync = storeVariant{"kv.Never", func(fs vfs.FS) (workStore, error) {
	o := crashKVOptions(fs)
	o.Sync = kv.Never
	return Open("data", &Options{KV: o})
}}

// noWaitDelete returns from DeleteRange before its transaction is
// written, let alone durable.
type noWaitDelete struct{ *Store }

func (s noWaitDelete) DeleteRange(min, max uint64) error {
	var ops []kv.Op
	for i := min; i <= max; i++ {
		ops = append(ops, kv.DeleteOp(logKey(i)))
	}
	s.kv.SubmitTxn(kv.Txn{Then: ops})
	return nil
}

// ascendingBack deletes from the back in batches in ascending order, so
// that a crash between them leaves a gap.
type ascendingBack struct{ *Store }

func (s ascendingBack) DeleteRange(min, max uint64) error {
	for i := min; i <= max; i += 2 {
		ops := []kv.Op{kv.DeleteOp(logKey(i))}
		if i+1 <= max {
			ops = append(ops, kv.DeleteOp(logKey(i+1)))
		}
		if _, err := s.kv.Txn(kv.Txn{Then: ops}); err != nil {
			return err
		}
	}
	return s.scanBounds()
}

func TestCrashCheckCatches(t *testing.T) {
	wrap := func(name string, f func(*Store) workStore) storeVariant {
		return storeVariant{name, func(fs vfs.FS) (workStore, error) {
			s, err := Open("data", &Options{KV: crashKVOptions(fs)})
			if err != nil {
				return nil, err
			}
			return f(s), nil
		}}
	}
	for _, tc := range []struct {
		v    storeVariant
		want string // in the first violation
	}{
		{neverSync, "lost"},
		{wrap("DeleteRange acknowledged before written", func(s *Store) workStore { return noWaitDelete{s} }), "reappears after an acknowledged DeleteRange"},
		{wrap("DeleteRange from the back in ascending batches", func(s *Store) workStore { return ascendingBack{s} }), "gap"},
	} {
		t.Run(tc.v.name, func(t *testing.T) {
			var err error
			for seed := uint64(0); seed < 10 && err == nil; seed++ {
				_, err = runCrashCheck(seed, 120, tc.v)
			}
			if err == nil {
				t.Fatalf("the checker passed %s", tc.v.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("first violation %q does not say %q", err, tc.want)
			}
			t.Logf("caught: %v", err)
		})
	}
}
