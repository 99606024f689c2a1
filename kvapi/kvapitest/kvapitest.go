// Package kvapitest is the conformance suite of kvapi.KV: every
// implementation runs Run in its tests, as io/fs implementations run
// testing/fstest.
//
// # What it checks
//
// Revisions strictly increasing, one per committed transaction; the
// CreateRev, ModRev and Version of the embedded store (a put or add of
// an absent key creates it at the transaction's revision with Version 1,
// each later change keeps CreateRev and adds one to Version, a delete
// and a new put start over); compares of every target (value, version,
// create and mod revision, existence) under every relation, on present
// and absent keys, checked against a reference written here; Else
// branches; fences by create and by mod revision (kv.ErrFenced and
// nothing written, checked before the compares); Add (a missing key
// counts as 0, kv.ErrNotInteger and kv.ErrOverflow writing nothing, an
// add in the branch not taken never failing the transaction, concurrent
// adds each applied once); Delete's kv.ErrNotFound; Range's order,
// limit, bounds and revision; kv.ErrInvalid for empty keys, empty
// transactions and negative limits; kv.ErrClosed after Close.
//
// Watch: under concurrent writers (puts, adds, deletes, two-key
// transactions) the events are exactly the acknowledged revisions'
// operations, in revision and transaction order, none left out, none
// doubled, none no one committed, and the state they leave is the one
// Range reads; Prev, CreateRev and Version of each event agree with the
// key's previous event; prefix filtering byte for byte; a watch from the
// past replays, one from a revision not yet committed yields nothing
// before it, one from 0 nothing committed before it started; a watch
// from a compacted revision (the compaction's own included) is a
// *kv.CompactedError with the revision asked and the oldest held, after
// Compact (an Option); a canceled context and Close end a watch with
// context.Canceled and kv.ErrClosed.
//
// Leases: Grant's TTL and Deadline; Revoke deleting the keys put on the
// lease (by PutLease and in a transaction) and no other, at the revision
// it returns, seen by a watch with their values; an expiry doing the
// same, no earlier than the Deadline; renewals keeping a lease and its
// keys past their first deadline (KeepAlive, KeepAliveLoop), deadlines
// never moving back; an add keeping its key's lease, a put without one
// unbinding it, an add on a lease kv.ErrInvalid; kv.ErrLeaseNotFound for
// every operation on an ended or unknown lease and for a put on it,
// which writes nothing, unless in the branch not taken; kv.ErrInvalid
// for a TTL out of range.
//
// # Differences it accepts
//
// Where the embedded store and etcd differ, the suite accepts either of
// two behaviours, and says which it saw with t.Log:
//
//   - A branch that writes one key twice: the embedded semantics (each
//     operation sees the ones before it), or kvapi.ErrUnsupported with
//     nothing written.
//   - A branch whose operations change nothing (deletes of absent keys):
//     Committed with the next revision, or not Committed with the
//     revision unchanged.
//   - A lease operation that deletes no key (a grant, a revoke of a lease
//     without keys): a revision of its own, or none.
//
// The lease checks take a few seconds (an expiry of a 1 s lease, renewals
// of a 2 s one past its deadline); a backend's minimum TTL must be at
// most 1 s.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		kvapitest.Run(t, func(t *testing.T) kvapi.KV { return kvapi.Local(openStore(t)) },
//			kvapitest.Compact(func(t *testing.T, db kvapi.KV) kvapi.KV { ... }))
//	}
//
// Run calls open once per subtest, and closes what it returns (or what
// Compact returned). The suite
// writes only keys under a prefix of its own, so the backend need not be
// empty, but it checks that the revision goes up by exactly one per
// transaction: nothing else may write to the backend while it runs.
package kvapitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
	"github.com/kvstore/kv/record"
)

// callTimeout bounds each call of the suite.
const callTimeout = 30 * time.Second

// Option configures Run.
type Option func(*config)

type config struct {
	compact func(t *testing.T, db kvapi.KV) kvapi.KV
}

// Compact gives the suite the way to make the backend let go of every
// change up to its current revision, for the checks of kv.ErrCompacted:
// compact returns the KV to go on with (db itself, or a KV on the store
// reopened), at the same revision. Without it those checks are skipped.
func Compact(compact func(t *testing.T, db kvapi.KV) kvapi.KV) Option {
	return func(c *config) { c.compact = compact }
}

// Run runs the conformance suite, each check as a subtest on a KV that
// open returns.
func Run(t *testing.T, open func(t *testing.T) kvapi.KV, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		f    func(*suite)
	}{
		{"Revisions", testRevisions},
		{"MultiKeyTxn", testMultiKeyTxn},
		{"Compares", testCompares},
		{"Conjunction", testConjunction},
		{"Else", testElse},
		{"Fences", testFences},
		{"FencedHelpers", testFencedHelpers},
		{"Add", testAdd},
		{"AddInTxn", testAddInTxn},
		{"ConcurrentAdds", testConcurrentAdds},
		{"Delete", testDelete},
		{"Range", testRange},
		{"SameKeyTwice", testSameKeyTwice},
		{"NoOpBranch", testNoOpBranch},
		{"Invalid", testInvalid},
		{"Close", testClose},
		{"WatchOrder", testWatchOrder},
		{"WatchPrev", testWatchPrev},
		{"WatchPrefix", testWatchPrefix},
		{"WatchCompacted", testWatchCompacted},
		{"WatchEnds", testWatchEnds},
		{"LeaseRevoke", testLeaseRevoke},
		{"LeaseBinding", testLeaseBinding},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseKeepAlive", testLeaseKeepAlive},
		{"LeaseInvalid", testLeaseInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t)
			var b [6]byte
			rand.Read(b[:])
			s := &suite{t: t, db: db, cfg: &cfg, prefix: "kvapitest/" + hex.EncodeToString(b[:]) + "/"}
			defer func() {
				if !s.closed {
					s.db.Close()
				}
			}()
			tc.f(s)
		})
	}
}

// suite is one subtest's KV and its key prefix.
type suite struct {
	t      *testing.T
	db     kvapi.KV
	cfg    *config
	prefix string
	closed bool
}

func (s *suite) key(k string) []byte { return []byte(s.prefix + k) }

func (s *suite) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	s.t.Cleanup(cancel)
	return ctx
}

// rev returns the backend's revision, as a read of the suite's prefix
// sees it.
func (s *suite) rev() kv.Revision {
	s.t.Helper()
	_, rev, err := s.db.Range(s.ctx(), s.key(""), nil, 1)
	if err != nil {
		s.t.Fatalf("Range for the revision: %v", err)
	}
	return rev
}

func (s *suite) put(k, v string) kv.Revision {
	s.t.Helper()
	rev, err := kvapi.Put(s.ctx(), s.db, s.key(k), []byte(v))
	if err != nil {
		s.t.Fatalf("Put(%q): %v", k, err)
	}
	return rev
}

func (s *suite) get(k string) (kv.Entry, bool) {
	s.t.Helper()
	e, err := s.db.Get(s.ctx(), s.key(k))
	if errors.Is(err, kv.ErrNotFound) {
		return kv.Entry{}, false
	}
	if err != nil {
		s.t.Fatalf("Get(%q): %v", k, err)
	}
	return e, true
}

func (s *suite) txn(t kv.Txn) kv.TxnResult {
	s.t.Helper()
	res, err := s.db.Txn(s.ctx(), t)
	if err != nil {
		s.t.Fatalf("Txn: %v", err)
	}
	return res
}

// want checks key k's state: absent when v is "-", else its value and
// revisions and version.
func (s *suite) want(k, v string, create, mod kv.Revision, version int64) {
	s.t.Helper()
	e, ok := s.get(k)
	if v == "-" {
		if ok {
			s.t.Errorf("%s = %q (create %d mod %d version %d), want absent", k, e.Value, e.CreateRev, e.ModRev, e.Version)
		}
		return
	}
	if !ok {
		s.t.Errorf("%s absent, want %q", k, v)
		return
	}
	if string(e.Key) != s.prefix+k || string(e.Value) != v || e.CreateRev != create || e.ModRev != mod || e.Version != version {
		s.t.Errorf("%s: key %q value %q create %d mod %d version %d; want value %q create %d mod %d version %d",
			k, e.Key, e.Value, e.CreateRev, e.ModRev, e.Version, v, create, mod, version)
	}
}

// wantRev checks that the backend's revision is still rev: nothing was
// committed.
func (s *suite) wantRev(rev kv.Revision, what string) {
	s.t.Helper()
	if got := s.rev(); got != rev {
		s.t.Errorf("%s: revision %d, want %d (nothing committed)", what, got, rev)
	}
}

// testRevisions: one revision per committed write, the entry's
// revisions and version through put, put, delete and put again, and a
// transaction that writes nothing.
func testRevisions(s *suite) {
	r0 := s.rev()
	r1 := s.put("a", "1")
	if r1 != r0+1 {
		s.t.Errorf("first put at %d after revision %d, want %d", r1, r0, r0+1)
	}
	s.want("a", "1", r1, r1, 1)
	r2 := s.put("a", "2")
	if r2 != r1+1 {
		s.t.Errorf("second put at %d, want %d", r2, r1+1)
	}
	s.want("a", "2", r1, r2, 2)
	r3 := s.put("a", "2") // the same value: still a change
	s.want("a", "2", r1, r3, 3)
	r4, err := kvapi.Delete(s.ctx(), s.db, s.key("a"))
	if err != nil || r4 != r3+1 {
		s.t.Errorf("Delete: revision %d, %v; want %d", r4, err, r3+1)
	}
	s.want("a", "-", 0, 0, 0)
	r5 := s.put("a", "3")
	if r5 != r4+1 {
		s.t.Errorf("put after delete at %d, want %d", r5, r4+1)
	}
	s.want("a", "3", r5, r5, 1) // created anew
	if got := s.rev(); got != r5 {
		s.t.Errorf("Range's revision %d, want the last commit's %d", got, r5)
	}
	// A transaction whose branch taken has no operations commits
	// nothing and reports the current revision.
	res := s.txn(kv.Txn{If: []kv.Compare{kv.Exists(s.key("a"))}, Else: []kv.Op{kv.PutOp(s.key("b"), nil)}})
	if !res.Succeeded || res.Committed || res.Revision != r5 {
		s.t.Errorf("read-only branch: %+v, want succeeded, not committed, revision %d", res, r5)
	}
	s.wantRev(r5, "read-only branch")
	// An empty value is a value.
	r6 := s.put("empty", "")
	s.want("empty", "", r6, r6, 1)
}

// testMultiKeyTxn: every operation of a transaction commits at its one
// revision.
func testMultiKeyTxn(s *suite) {
	r1 := s.put("x", "old")
	res := s.txn(kv.Txn{Then: []kv.Op{
		kv.PutOp(s.key("x"), []byte("new")),
		kv.PutOp(s.key("y"), []byte("y")),
		kv.AddOp(s.key("n"), 5),
	}})
	if !res.Succeeded || !res.Committed || res.Revision != r1+1 {
		s.t.Errorf("txn: %+v, want committed at %d", res, r1+1)
	}
	r := res.Revision
	s.want("x", "new", r1, r, 2)
	s.want("y", "y", r, r, 1)
	s.want("n", "5", r, r, 1)
	res = s.txn(kv.Txn{Then: []kv.Op{kv.DeleteOp(s.key("x")), kv.AddOp(s.key("n"), -7)}})
	if res.Revision != r+1 {
		s.t.Errorf("second txn at %d, want %d", res.Revision, r+1)
	}
	s.want("x", "-", 0, 0, 0)
	s.want("n", "-2", r, r+1, 2)
}

// state is a key's state for the reference evaluation of compares.
type state struct {
	present     bool
	value       []byte
	create, mod int64
	version     int64
	exists      int64
}

// refHolds is the reference: how package kv evaluates compare c on a
// key in state st, written from kv's documentation.
func refHolds(c kv.Compare, st state) bool {
	var sign int
	switch {
	case c.Target == record.TargetValue:
		if !st.present {
			return c.Cmp == kv.NotEqual // an absent value is unequal to every value, and no more
		}
		sign = bytes.Compare(st.value, c.Value)
	default:
		var n int64
		switch c.Target {
		case record.TargetVersion:
			n = st.version
		case record.TargetCreateRev:
			n = st.create
		case record.TargetModRev:
			n = st.mod
		case record.TargetExists:
			n = st.exists
		}
		switch {
		case n < c.Num:
			sign = -1
		case n > c.Num:
			sign = 1
		}
	}
	switch c.Cmp {
	case kv.Equal:
		return sign == 0
	case kv.NotEqual:
		return sign != 0
	case kv.Less:
		return sign < 0
	case kv.Greater:
		return sign > 0
	}
	return false
}

var relations = []struct {
	name string
	cmp  kv.Cmp
}{{"=", kv.Equal}, {"!=", kv.NotEqual}, {"<", kv.Less}, {">", kv.Greater}}

// testCompares evaluates every target under every relation, on a
// present key against a smaller, equal and larger operand, and on an
// absent key, against the reference; each outcome shows in which branch
// ran.
func testCompares(s *suite) {
	s.put("k", "a")
	s.put("k", "m") // version 2, mod after create
	s.put("other", "o")
	e, _ := s.get("k")
	present := state{present: true, value: e.Value, create: int64(e.CreateRev), mod: int64(e.ModRev), version: e.Version, exists: 1}
	type operand struct {
		name string
		make func(key []byte, c kv.Cmp) kv.Compare
	}
	var ops []operand
	for _, v := range []string{"", "a", "m", "m\x00", "z"} {
		ops = append(ops, operand{"value " + strconv.Quote(v), func(k []byte, c kv.Cmp) kv.Compare { return kv.CompareValue(k, c, []byte(v)) }})
	}
	for _, n := range []int64{-1, 0, 1, e.Version, e.Version + 1} {
		ops = append(ops, operand{fmt.Sprintf("version %d", n), func(k []byte, c kv.Cmp) kv.Compare { return kv.CompareVersion(k, c, n) }})
	}
	for _, r := range []int64{0, int64(e.CreateRev) - 1, int64(e.CreateRev), int64(e.CreateRev) + 1} {
		ops = append(ops, operand{fmt.Sprintf("create %d", r), func(k []byte, c kv.Cmp) kv.Compare { return kv.CompareCreateRev(k, c, kv.Revision(r)) }})
	}
	for _, r := range []int64{0, int64(e.ModRev) - 1, int64(e.ModRev), int64(e.ModRev) + 1} {
		ops = append(ops, operand{fmt.Sprintf("mod %d", r), func(k []byte, c kv.Cmp) kv.Compare { return kv.CompareModRev(k, c, kv.Revision(r)) }})
	}
	for _, n := range []int64{0, 1} {
		ops = append(ops, operand{fmt.Sprintf("exists %d", n), func(k []byte, c kv.Cmp) kv.Compare {
			x := kv.Exists(k)
			x.Cmp, x.Num = c, n
			return x
		}})
	}
	for _, key := range []struct {
		name string
		st   state
	}{{"k", present}, {"absent", state{}}} {
		for _, op := range ops {
			for _, rel := range relations {
				c := op.make(s.key(key.name), rel.cmp)
				want := refHolds(c, key.st)
				before := s.rev()
				res := s.txn(kv.Txn{
					If:   []kv.Compare{c},
					Then: []kv.Op{kv.PutOp(s.key("out"), []byte("then"))},
					Else: []kv.Op{kv.PutOp(s.key("out"), []byte("else"))},
				})
				branch := "else"
				if want {
					branch = "then"
				}
				out, _ := s.get("out")
				if res.Succeeded != want || string(out.Value) != branch || res.Revision != before+1 || !res.Committed {
					s.t.Errorf("%s: %s %s: succeeded %v, %q ran, revision %d; want %v, %q at %d",
						key.name, op.name, rel.name, res.Succeeded, out.Value, res.Revision, want, branch, before+1)
				}
			}
		}
	}
}

// testConjunction: every compare must hold.
func testConjunction(s *suite) {
	s.put("a", "1")
	yes, no := kv.Exists(s.key("a")), kv.Absent(s.key("a"))
	for _, tc := range []struct {
		name string
		If   []kv.Compare
		want bool
	}{
		{"none", nil, true},
		{"true", []kv.Compare{yes}, true},
		{"true, true", []kv.Compare{yes, kv.CompareValue(s.key("a"), kv.Equal, []byte("1"))}, true},
		{"true, false", []kv.Compare{yes, no}, false},
		{"false, true", []kv.Compare{no, yes}, false},
	} {
		res := s.txn(kv.Txn{If: tc.If, Then: []kv.Op{kv.PutOp(s.key("t"), nil)}, Else: []kv.Op{kv.PutOp(s.key("e"), nil)}})
		if res.Succeeded != tc.want {
			s.t.Errorf("%s: succeeded %v, want %v", tc.name, res.Succeeded, tc.want)
		}
	}
}

// testElse: the Else operations run, at one revision, when a compare
// fails; Then's do not.
func testElse(s *suite) {
	r1 := s.put("a", "1")
	res := s.txn(kv.Txn{
		If:   []kv.Compare{kv.CompareValue(s.key("a"), kv.Equal, []byte("2"))},
		Then: []kv.Op{kv.PutOp(s.key("then"), []byte("t"))},
		Else: []kv.Op{kv.PutOp(s.key("else"), []byte("e")), kv.DeleteOp(s.key("a")), kv.AddOp(s.key("n"), 2)},
	})
	if res.Succeeded || !res.Committed || res.Revision != r1+1 {
		s.t.Errorf("Else: %+v, want failed compares, committed at %d", res, r1+1)
	}
	s.want("then", "-", 0, 0, 0)
	s.want("else", "e", r1+1, r1+1, 1)
	s.want("a", "-", 0, 0, 0)
	s.want("n", "2", r1+1, r1+1, 1)
	// A failed compare with no Else writes nothing.
	res = s.txn(kv.Txn{If: []kv.Compare{kv.Exists(s.key("a"))}, Then: []kv.Op{kv.PutOp(s.key("then"), nil)}})
	if res.Succeeded || res.Committed || res.Revision != r1+1 {
		s.t.Errorf("no Else: %+v, want not committed at %d", res, r1+1)
	}
}

// testFences: a fence by create or mod revision lets a write through
// while the fence key has the token, and otherwise fails it with
// kv.ErrFenced before its compares, writing nothing.
func testFences(s *suite) {
	lock := s.key("lock")
	created := s.put("lock", "holder-1")
	modded := s.put("lock", "holder-1 renewed")
	s.put("x", "0")
	write := kv.Txn{
		If:   []kv.Compare{kv.CompareValue(s.key("x"), kv.Equal, []byte("0"))},
		Then: []kv.Op{kv.PutOp(s.key("x"), []byte("then"))},
		Else: []kv.Op{kv.PutOp(s.key("x"), []byte("else"))},
	}
	fenced := func(f kv.Fence, t kv.Txn) (kv.TxnResult, error) {
		t.Fence = &f
		return s.db.Txn(s.ctx(), t)
	}
	for _, tc := range []struct {
		name string
		f    kv.Fence
		ok   bool
	}{
		{"create, current", kv.Fence{Key: lock, Token: created}, true},
		{"create, older", kv.Fence{Key: lock, Token: created - 1}, false},
		{"create, newer", kv.Fence{Key: lock, Token: created + 1}, false},
		{"create, the mod revision", kv.Fence{Key: lock, Token: modded}, false},
		{"mod, current", kv.Fence{Key: lock, Token: modded, By: kv.FenceModRev}, true},
		{"mod, the create revision", kv.Fence{Key: lock, Token: created, By: kv.FenceModRev}, false},
		{"absent key, token 0", kv.Fence{Key: s.key("nolock"), Token: 0}, false},
		{"absent key, token 0, by mod", kv.Fence{Key: s.key("nolock"), Token: 0, By: kv.FenceModRev}, false},
		{"absent key", kv.Fence{Key: s.key("nolock"), Token: created}, false},
	} {
		s.put("x", "0")
		before := s.rev()
		res, err := fenced(tc.f, write)
		x, _ := s.get("x")
		if tc.ok {
			if err != nil || !res.Succeeded || res.Revision != before+1 || string(x.Value) != "then" {
				s.t.Errorf("%s: %+v, %v, x=%q; want then committed at %d", tc.name, res, err, x.Value, before+1)
			}
			continue
		}
		if !errors.Is(err, kv.ErrFenced) {
			s.t.Errorf("%s: %+v, %v; want kv.ErrFenced", tc.name, res, err)
		}
		if string(x.Value) != "0" {
			s.t.Errorf("%s: x = %q, want it unwritten", tc.name, x.Value)
		}
		s.wantRev(before, tc.name)
	}
	// A stale fence fails even a transaction whose compares fail and
	// whose Else is empty, and one with no operations at all.
	before := s.rev()
	stale := kv.Fence{Key: lock, Token: created - 1}
	if _, err := fenced(stale, kv.Txn{If: []kv.Compare{kv.Absent(lock)}, Then: []kv.Op{kv.PutOp(s.key("x"), nil)}}); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("stale fence, failing compares: %v, want kv.ErrFenced", err)
	}
	if _, err := fenced(stale, kv.Txn{}); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("stale fence, no operations: %v, want kv.ErrFenced", err)
	}
	s.wantRev(before, "stale fences")
	// A new holder: the key deleted and created again.
	if _, err := kvapi.Delete(s.ctx(), s.db, lock); err != nil {
		s.t.Fatal(err)
	}
	recreated := s.put("lock", "holder-2")
	if _, err := fenced(kv.Fence{Key: lock, Token: created}, write); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("old holder's token after a new holder: %v, want kv.ErrFenced", err)
	}
	if _, err := fenced(kv.Fence{Key: lock, Token: recreated}, write); err != nil {
		s.t.Errorf("new holder's token: %v", err)
	}
}

// testFencedHelpers: Put, Delete and Add under a fence.
func testFencedHelpers(s *suite) {
	token := s.put("lock", "h")
	ok := kvapi.Fenced(s.db, kv.Fence{Key: s.key("lock"), Token: token})
	stale := kvapi.Fenced(s.db, kv.Fence{Key: s.key("lock"), Token: token + 100})
	ctx := s.ctx()
	if _, err := ok.Put(ctx, s.key("p"), []byte("1")); err != nil {
		s.t.Errorf("fenced Put: %v", err)
	}
	if n, _, err := ok.Add(ctx, s.key("n"), 3); err != nil || n != 3 {
		s.t.Errorf("fenced Add: %d, %v", n, err)
	}
	before := s.rev()
	if _, err := stale.Put(ctx, s.key("p"), []byte("2")); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("stale Put: %v", err)
	}
	if _, _, err := stale.Add(ctx, s.key("n"), 1); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("stale Add: %v", err)
	}
	if _, err := stale.Delete(ctx, s.key("p")); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("stale Delete: %v", err)
	}
	if _, err := stale.Delete(ctx, s.key("absent")); !errors.Is(err, kv.ErrFenced) {
		s.t.Errorf("stale Delete of an absent key: %v, want the fence checked first", err)
	}
	s.wantRev(before, "stale fenced helpers")
	if _, err := ok.Delete(ctx, s.key("absent")); !errors.Is(err, kv.ErrNotFound) {
		s.t.Errorf("fenced Delete of an absent key: %v, want kv.ErrNotFound", err)
	}
	if _, err := ok.Delete(ctx, s.key("p")); err != nil {
		s.t.Errorf("fenced Delete: %v", err)
	}
	s.want("n", "3", before, before, 1)
}

// testAdd: the Add helper's value, revisions and errors.
func testAdd(s *suite) {
	ctx := s.ctx()
	n, r1, err := kvapi.Add(ctx, s.db, s.key("c"), 5)
	if err != nil || n != 5 {
		s.t.Fatalf("Add to a missing key: %d, %v; want 5", n, err)
	}
	s.want("c", "5", r1, r1, 1)
	n, r2, err := kvapi.Add(ctx, s.db, s.key("c"), -12)
	if err != nil || n != -7 || r2 != r1+1 {
		s.t.Errorf("Add -12: %d at %d, %v; want -7 at %d", n, r2, err, r1+1)
	}
	s.want("c", "-7", r1, r2, 2)
	if n, _, err := kvapi.Add(ctx, s.db, s.key("c"), 0); err != nil || n != -7 {
		s.t.Errorf("Add 0: %d, %v", n, err)
	}
	s.put("word", "abc")
	s.put("big", strconv.FormatInt(math.MaxInt64-1, 10))
	s.put("small", strconv.FormatInt(math.MinInt64+1, 10))
	s.put("spaced", " 1")
	before := s.rev()
	for _, tc := range []struct {
		key   string
		delta int64
		want  error
	}{
		{"word", 1, kv.ErrNotInteger},
		{"spaced", 1, kv.ErrNotInteger},
		{"big", 2, kv.ErrOverflow},
		{"small", -2, kv.ErrOverflow},
	} {
		if _, _, err := kvapi.Add(ctx, s.db, s.key(tc.key), tc.delta); !errors.Is(err, tc.want) {
			s.t.Errorf("Add(%s, %d): %v, want %v", tc.key, tc.delta, err, tc.want)
		}
	}
	s.wantRev(before, "failed adds")
	if n, _, err := kvapi.Add(ctx, s.db, s.key("big"), 1); err != nil || n != math.MaxInt64 {
		s.t.Errorf("Add to MaxInt64: %d, %v", n, err)
	}
	if n, _, err := kvapi.Add(ctx, s.db, s.key("small"), -1); err != nil || n != math.MinInt64 {
		s.t.Errorf("Add to MinInt64: %d, %v", n, err)
	}
}

// testAddInTxn: kv.AddOp in a transaction, in the branch taken and in
// the branch not taken.
func testAddInTxn(s *suite) {
	s.put("word", "abc")
	s.put("n", "10")
	before := s.rev()
	_, err := s.db.Txn(s.ctx(), kv.Txn{Then: []kv.Op{kv.PutOp(s.key("x"), nil), kv.AddOp(s.key("word"), 1)}})
	if !errors.Is(err, kv.ErrNotInteger) {
		s.t.Errorf("txn adding to a word: %v, want kv.ErrNotInteger", err)
	}
	s.want("x", "-", 0, 0, 0)
	s.wantRev(before, "failed add in a txn")
	// The branch not taken is never applied: its bad add does not fail
	// the transaction.
	res := s.txn(kv.Txn{
		If:   []kv.Compare{kv.Exists(s.key("n"))},
		Then: []kv.Op{kv.AddOp(s.key("n"), 1)},
		Else: []kv.Op{kv.AddOp(s.key("word"), 1)},
	})
	if !res.Succeeded || res.Revision != before+1 {
		s.t.Errorf("add in Then, bad add in Else: %+v", res)
	}
	s.want("n", "11", before, before+1, 2)
	res = s.txn(kv.Txn{
		If:   []kv.Compare{kv.Absent(s.key("n"))},
		Then: []kv.Op{kv.AddOp(s.key("word"), 1)},
		Else: []kv.Op{kv.AddOp(s.key("n"), -11), kv.AddOp(s.key("m"), 4)},
	})
	if res.Succeeded || res.Revision != before+2 {
		s.t.Errorf("bad add in Then, add in Else: %+v", res)
	}
	s.want("n", "0", before, before+2, 3)
	s.want("m", "4", before+2, before+2, 1)
	// Under a compare on the added key itself.
	res = s.txn(kv.Txn{
		If:   []kv.Compare{kv.CompareValue(s.key("n"), kv.Equal, []byte("0"))},
		Then: []kv.Op{kv.AddOp(s.key("n"), 1)},
	})
	if !res.Succeeded {
		s.t.Errorf("add under a compare of its key: %+v", res)
	}
	s.want("n", "1", before, before+3, 4)
}

// testConcurrentAdds: adds from several goroutines are each applied
// once, at distinct revisions.
func testConcurrentAdds(s *suite) {
	const workers, each = 4, 8
	var mu sync.Mutex
	revs := map[kv.Revision]bool{}
	vals := map[int64]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				n, rev, err := kvapi.Add(s.ctx(), s.db, s.key("c"), 1)
				if err != nil {
					s.t.Errorf("Add: %v", err)
					return
				}
				mu.Lock()
				if revs[rev] || vals[n] {
					s.t.Errorf("revision %d or value %d returned twice", rev, n)
				}
				revs[rev], vals[n] = true, true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	e, _ := s.get("c")
	if string(e.Value) != strconv.Itoa(workers*each) || e.Version != workers*each {
		s.t.Errorf("c = %q version %d, want %d and %d", e.Value, e.Version, workers*each, workers*each)
	}
}

// testDelete: Delete of an absent key is kv.ErrNotFound and commits
// nothing.
func testDelete(s *suite) {
	before := s.rev()
	if _, err := kvapi.Delete(s.ctx(), s.db, s.key("none")); !errors.Is(err, kv.ErrNotFound) {
		s.t.Errorf("Delete of an absent key: %v, want kv.ErrNotFound", err)
	}
	s.wantRev(before, "Delete of an absent key")
	if _, err := s.db.Get(s.ctx(), s.key("none")); !errors.Is(err, kv.ErrNotFound) {
		s.t.Errorf("Get of an absent key: %v, want kv.ErrNotFound", err)
	}
}

// testRange: key order, bounds, limit and the revision.
func testRange(s *suite) {
	keys := []string{"a", "a\x00", "ab", "a\xff", "b", "b/1", "b/2", "c", "\xff"}
	for _, k := range []string{"c", "b/2", "a\xff", "ab", "a", "\xff", "b", "a\x00", "b/1"} {
		s.put(k, "v-"+k)
	}
	last := s.rev()
	rng := func(start, end []byte, limit int) []string {
		s.t.Helper()
		es, rev, err := s.db.Range(s.ctx(), start, end, limit)
		if err != nil {
			s.t.Fatalf("Range: %v", err)
		}
		if rev != last {
			s.t.Errorf("Range's revision %d, want %d", rev, last)
		}
		var out []string
		for _, e := range es {
			if !bytes.HasPrefix(e.Key, []byte(s.prefix)) {
				out = append(out, "(another prefix)")
				continue
			}
			k := string(e.Key[len(s.prefix):])
			if string(e.Value) != "v-"+k {
				s.t.Errorf("Range: %q = %q", k, e.Value)
			}
			out = append(out, k)
		}
		return out
	}
	p := s.key("")
	end := []byte(s.prefix[:len(s.prefix)-1] + "0") // '/'+1: the prefix's end
	for _, tc := range []struct {
		name       string
		start, end []byte
		limit      int
		want       []string
	}{
		{"all", p, end, 0, keys},
		{"limit 1", p, end, 1, keys[:1]},
		{"limit 3", p, end, 3, keys[:3]},
		{"limit past the end", p, end, 100, keys},
		{"from b", s.key("b"), end, 0, keys[4:]},
		{"[a, b)", s.key("a"), s.key("b"), 0, keys[:4]},
		{"[a\\x00, ab]", s.key("a\x00"), s.key("ab\x00"), 0, keys[1:3]},
		{"b/ prefix", s.key("b/"), s.key("b0"), 0, keys[5:7]},
		{"one key", s.key("c"), s.key("c\x00"), 0, []string{"c"}},
		{"empty: start = end", s.key("b"), s.key("b"), 0, nil},
		{"empty: start > end", s.key("c"), s.key("b"), 0, nil},
		{"empty: end is empty", s.key("a"), []byte{}, 0, nil},
		{"empty: end \\x00", nil, []byte{0}, 0, nil},
	} {
		got := rng(tc.start, tc.end, tc.limit)
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			s.t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// No upper bound, and no lower bound: the suite's keys are among
	// them, in order.
	all := rng(p, nil, 0)
	if fmt.Sprintf("%q", all[:len(keys)]) != fmt.Sprintf("%q", keys) {
		s.t.Errorf("nil end: %q, want %q first", all, keys)
	}
	es, _, err := s.db.Range(s.ctx(), nil, end, 0)
	if err != nil || len(es) < len(keys) {
		s.t.Fatalf("nil start: %d entries, %v", len(es), err)
	}
	for i := 1; i < len(es); i++ {
		if bytes.Compare(es[i-1].Key, es[i].Key) >= 0 {
			s.t.Errorf("nil start: %q before %q", es[i-1].Key, es[i].Key)
		}
	}
	if got := string(es[len(es)-1].Key); got != s.prefix+"\xff" {
		s.t.Errorf("nil start: ends at %q", got)
	}
	// Entries carry their revisions.
	es, _, _ = s.db.Range(s.ctx(), s.key("c"), s.key("c\x00"), 0)
	if e, ok := s.get("c"); !ok || len(es) != 1 || es[0].ModRev != e.ModRev || es[0].CreateRev != e.CreateRev || es[0].Version != 1 {
		s.t.Errorf("Range's entry %+v, Get's %+v", es, e)
	}
}

// testSameKeyTwice: a branch that writes one key twice commits with the
// embedded semantics, or fails with kvapi.ErrUnsupported writing
// nothing.
func testSameKeyTwice(s *suite) {
	s.put("k", "old")
	for _, tc := range []struct {
		name string
		ops  []kv.Op
		// want is k after the embedded semantics: value ("-" absent),
		// create revision relative to the txn's (0 the old one, 1 the
		// txn's), version.
		want    string
		created bool
		version int64
	}{
		{"put, put", []kv.Op{kv.PutOp(s.key("k"), []byte("1")), kv.PutOp(s.key("k"), []byte("2"))}, "2", false, 0},
		{"put, delete", []kv.Op{kv.PutOp(s.key("k"), []byte("1")), kv.DeleteOp(s.key("k"))}, "-", false, 0},
		{"delete, put", []kv.Op{kv.DeleteOp(s.key("k")), kv.PutOp(s.key("k"), []byte("3"))}, "3", true, 1},
		{"put, add", []kv.Op{kv.PutOp(s.key("k"), []byte("5")), kv.AddOp(s.key("k"), 2)}, "7", false, 0},
	} {
		before := s.rev()
		old, had := s.get("k")
		res, err := s.db.Txn(s.ctx(), kv.Txn{Then: tc.ops})
		if errors.Is(err, kvapi.ErrUnsupported) {
			s.t.Logf("%s: kvapi.ErrUnsupported", tc.name)
			s.wantRev(before, tc.name+" refused")
			if e, ok := s.get("k"); ok != had || string(e.Value) != string(old.Value) || e.ModRev != old.ModRev {
				s.t.Errorf("%s refused, but k changed: %+v", tc.name, e)
			}
			continue
		}
		if err != nil || res.Revision != before+1 {
			s.t.Errorf("%s: %+v, %v; want committed at %d, or kvapi.ErrUnsupported", tc.name, res, err, before+1)
			continue
		}
		s.t.Logf("%s: the embedded semantics", tc.name)
		if tc.want == "-" {
			s.want("k", "-", 0, 0, 0)
			s.put("k", "old")
			continue
		}
		create, version := old.CreateRev, old.Version+int64(len(tc.ops))
		if tc.created || !had {
			create, version = res.Revision, 1
		}
		s.want("k", tc.want, create, res.Revision, version)
	}
}

// testNoOpBranch: a branch of deletes of absent keys either commits an
// empty change at the next revision, or commits nothing.
func testNoOpBranch(s *suite) {
	before := s.rev()
	res := s.txn(kv.Txn{Then: []kv.Op{kv.DeleteOp(s.key("none"))}})
	switch {
	case res.Committed && res.Revision == before+1:
		s.t.Logf("a delete of an absent key commits revision %d", res.Revision)
		s.wantRev(before+1, "committed no-op")
	case !res.Committed && res.Revision == before:
		s.t.Logf("a delete of an absent key commits nothing")
		s.wantRev(before, "no-op")
	default:
		s.t.Errorf("delete of an absent key: %+v after revision %d", res, before)
	}
	if !res.Succeeded {
		s.t.Errorf("no compares, yet not succeeded")
	}
}

// testInvalid: empty keys, empty transactions and negative limits are
// kv.ErrInvalid; a context that has ended fails the call, writing
// nothing.
func testInvalid(s *suite) {
	ctx := s.ctx()
	before := s.rev()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"empty transaction", func() error { _, err := s.db.Txn(ctx, kv.Txn{}); return err }},
		{"put of an empty key", func() error { _, err := kvapi.Put(ctx, s.db, nil, []byte("v")); return err }},
		{"compare of an empty key", func() error {
			_, err := s.db.Txn(ctx, kv.Txn{If: []kv.Compare{kv.Exists(nil)}, Then: []kv.Op{kv.PutOp(s.key("x"), nil)}})
			return err
		}},
		{"get of an empty key", func() error { _, err := s.db.Get(ctx, nil); return err }},
		{"negative limit", func() error { _, _, err := s.db.Range(ctx, s.key(""), nil, -1); return err }},
	} {
		if err := tc.call(); !errors.Is(err, kv.ErrInvalid) && !(tc.name == "get of an empty key" && errors.Is(err, kv.ErrNotFound)) {
			s.t.Errorf("%s: %v, want kv.ErrInvalid", tc.name, err)
		}
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := kvapi.Put(done, s.db, s.key("late"), nil); !errors.Is(err, context.Canceled) {
		s.t.Errorf("Put with an ended context: %v, want context.Canceled", err)
	}
	s.wantRev(before, "invalid calls")
}

// testClose: every method returns kv.ErrClosed after Close.
func testClose(s *suite) {
	s.put("a", "1")
	if err := s.db.Close(); err != nil {
		s.t.Fatalf("Close: %v", err)
	}
	s.closed = true
	ctx := s.ctx()
	if _, err := s.db.Get(ctx, s.key("a")); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("Get after Close: %v", err)
	}
	if _, _, err := s.db.Range(ctx, s.key(""), nil, 0); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("Range after Close: %v", err)
	}
	if _, err := kvapi.Put(ctx, s.db, s.key("a"), nil); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("Put after Close: %v", err)
	}
	if _, _, err := kvapi.Add(ctx, s.db, s.key("n"), 1); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("Add after Close: %v", err)
	}
}
