package etcdkv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// TestModelHistories runs the model on histories written by hand: an add
// of unknown outcome may be found applied once, or not at all, but never
// twice; an acknowledged write must be found.
func TestModelHistories(t *testing.T) {
	type op struct {
		in        linInput
		out       linOutput
		call, ret int64
	}
	put := func(v string, rev int64, call, ret int64) op {
		return op{linInput{kind: linPut, key: "k", value: v}, linOutput{rev: rev, committed: true}, call, ret}
	}
	addUnknown := func(delta int64, call, ret int64) op {
		return op{linInput{kind: linAdd, key: "k", delta: delta}, linOutput{err: errUnknown}, call, ret}
	}
	get := func(v string, create, mod, version int64, call, ret int64) op {
		return op{linInput{kind: linGet, key: "k"}, linOutput{found: true, value: v, createRev: create, modRev: mod, version: version}, call, ret}
	}
	for _, tc := range []struct {
		name string
		ops  []op
		ok   bool
	}{
		{"unknown add not applied", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10), get("1", 2, 2, 1, 11, 12)}, true},
		{"unknown add applied once", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10), get("6", 2, 3, 2, 11, 12)}, true},
		{"unknown add applied once, later", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10), get("6", 2, 9, 2, 11, 12)}, true},
		{"unknown add at an impossible revision", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10), get("6", 2, 2, 2, 11, 12)}, false},
		{"unknown add applied after a known one", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10),
			op{linInput{kind: linAdd, key: "k", delta: 1}, linOutput{n: 2, rev: 3, committed: true}, 4, 5}, get("7", 2, 4, 3, 11, 12)}, true},
		{"unknown add applied twice", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10), get("11", 2, 5, 3, 11, 12)}, false},
		{"two unknown adds, both applied", []op{put("1", 2, 1, 2), addUnknown(5, 3, 10), addUnknown(5, 4, 10), get("11", 2, 5, 3, 11, 12)}, true},
		{"acknowledged put lost", []op{put("1", 2, 1, 2), put("2", 3, 3, 4), get("1", 2, 2, 1, 5, 6)}, false},
		{"acknowledged put found", []op{put("1", 2, 1, 2), put("2", 3, 3, 4), get("2", 2, 3, 2, 5, 6)}, true},
		{"revision going back", []op{put("1", 5, 1, 2), put("2", 3, 3, 4)}, false},
		{"stale read", []op{put("1", 2, 1, 2), get("1", 2, 2, 1, 3, 4), put("2", 3, 5, 6), get("1", 2, 2, 1, 7, 8)}, false},
	} {
		var h []porcupine.Operation
		for i, o := range tc.ops {
			h = append(h, porcupine.Operation{ClientId: i, Input: o.in, Output: o.out, Call: o.call, Return: o.ret})
		}
		res := porcupine.CheckOperations(linModel, h)
		if res != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, res, tc.ok)
		}
	}
}

// doubleAdd applies every third add twice and reports an unknown
// outcome, as a client that retried an add after a timeout would.
type doubleAdd struct {
	kvapi.KV
	mu sync.Mutex
	n  int
}

func (d *doubleAdd) Add(ctx context.Context, key []byte, delta int64, fence *kv.Fence) (int64, kv.Revision, error) {
	n, rev, err := d.KV.(kvapi.Adder).Add(ctx, key, delta, fence)
	d.mu.Lock()
	d.n++
	twice := d.n%3 == 0
	d.mu.Unlock()
	if err != nil || !twice {
		return n, rev, err
	}
	d.KV.(kvapi.Adder).Add(ctx, key, delta, fence)
	return 0, 0, fmt.Errorf("%w: the add's answer was lost, and it was sent again", kvapi.ErrUnknownOutcome)
}

// staleGet answers every other Get from the value it read before.
type staleGet struct {
	kvapi.KV
	mu    sync.Mutex
	n     int
	cache map[string]kv.Entry
}

func (s *staleGet) Get(ctx context.Context, key []byte) (kv.Entry, error) {
	s.mu.Lock()
	s.n++
	e, ok := s.cache[string(key)]
	stale := ok && s.n%2 == 0
	s.mu.Unlock()
	if stale {
		return e, nil
	}
	e, err := s.KV.Get(ctx, key)
	if err == nil {
		s.mu.Lock()
		if s.cache == nil {
			s.cache = map[string]kv.Entry{}
		}
		s.cache[string(key)] = e
		s.mu.Unlock()
	}
	return e, err
}

// lostPut acknowledges every fifth put without writing it.
type lostPut struct {
	kvapi.KV
	mu sync.Mutex
	n  int
}

func (l *lostPut) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	l.mu.Lock()
	l.n++
	lose := l.n%5 == 0 && len(t.If) == 0 && t.Fence == nil && len(t.Then) == 1 && t.Then[0].Kind == kv.PutOp(nil, nil).Kind
	l.mu.Unlock()
	if lose {
		_, rev, err := l.KV.Range(ctx, []byte("zzz"), nil, 1)
		return kv.TxnResult{Succeeded: true, Committed: true, Revision: rev + 1}, err
	}
	return l.KV.Txn(ctx, t)
}

// TestCheckerCatches runs the linearizability check on deliberately
// wrong clients of the cluster, without faults: each must fail it.
func TestCheckerCatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(kvapi.KV) kvapi.KV
	}{
		{"add applied twice", func(db kvapi.KV) kvapi.KV { return &doubleAdd{KV: db} }},
		{"stale reads", func(db kvapi.KV) kvapi.KV { return &staleGet{KV: db} }},
		{"lost puts", func(db kvapi.KV) kvapi.KV { return &lostPut{KV: db} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := runLinearizability(t, linConfig{clients: 3, phaseOps: 600, wrap: tc.wrap})
			err := checkHistory(rec, false)
			if err == nil {
				t.Fatalf("the check passed %d operations of a wrong client (%v)", len(rec.ops), rec.stats)
			}
			t.Logf("caught: %v", err)
		})
	}
}
