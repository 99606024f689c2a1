package kv

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvstore/kv/layered"
	"github.com/kvstore/kv/record"
)

// These tests drive the committer's gathering and evaluation directly,
// on a map and a queue, with no log, directory or goroutine of a store.

// testCommitter returns a committer over m that evaluates and gathers
// but has no log: commit and checkpoints need one.
func testCommitter(m *record.Map) *committer {
	sh := &shared{m: layered.New(m, nil), reqs: make(chan *request, 2*maxBatch),
		hist: newHistory(m.Revision(), DefaultWatchHistoryBytes)}
	var o Options
	return newCommitter(sh, nil, "", o.logger(), o, nil)
}

func single(op Op) *request {
	r := &request{single: true, one: [1]Op{op}}
	r.txn.Then = r.one[:]
	return r
}

// groupRecords decodes the records the group logs, in order.
func groupRecords(t *testing.T, c *committer) []record.Record {
	t.Helper()
	var recs []record.Record
	offs := append(append([]int(nil), c.g.offsets...), len(c.buf))
	for i := 0; i+1 < len(offs); i++ {
		rec, err := record.Decode(c.buf[offs[i]:offs[i+1]])
		if err != nil {
			t.Fatalf("record %d of the group: %v", i, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// TestEvaluateInGroup: each request of a group is evaluated against the
// state the ones before it leave, its record is logged in revision order
// with no gap, a request that fails stages nothing and takes no
// revision, and the map is not written until apply.
func TestEvaluateInGroup(t *testing.T) {
	m := record.NewMap()
	c := testCommitter(m)
	fence := func(key string, tok Revision, op Op) *request {
		r := single(op)
		r.txn.Fence = &Fence{Key: []byte(key), Token: tok, By: FenceModRev}
		return r
	}
	reqs := []*request{
		single(PutOp([]byte("a"), []byte("1"))), // rev 1
		{txn: Txn{If: []Compare{Exists([]byte("a"))}, // rev 2, Then: a exists in the overlay
			Then: []Op{PutOp([]byte("b"), []byte("x"))}, Else: []Op{PutOp([]byte("c"), []byte("y"))}}},
		single(AddOp([]byte("a"), 5)),                                                 // rev 3: 6
		fence("a", 1, PutOp([]byte("d"), []byte("stale"))),                            // a changed at 3
		fence("a", 3, PutOp([]byte("d"), []byte("current"))),                          // rev 4
		{single: true, mustExist: true, txn: Txn{Then: []Op{DeleteOp([]byte("zz"))}}}, // not found
		single(AddOp([]byte("b"), 1)),                                                 // b is "x"
		{single: true, mustExist: true, txn: Txn{Then: []Op{DeleteOp([]byte("a"))}}},  // rev 5
	}
	c.begin()
	for _, r := range reqs {
		c.take(r)
	}
	wantErr := []error{nil, nil, nil, ErrFenced, nil, ErrNotFound, ErrNotInteger, nil}
	wantRev := []Revision{1, 2, 3, 0, 4, 0, 0, 5}
	for i, r := range reqs {
		if !errors.Is(r.err, wantErr[i]) || (wantErr[i] == nil) != (r.err == nil) {
			t.Errorf("request %d: error %v, want %v", i, r.err, wantErr[i])
		}
		if r.res.Revision != wantRev[i] || r.res.Committed != (wantRev[i] != 0) {
			t.Errorf("request %d: revision %d committed %v, want %d", i, r.res.Revision, r.res.Committed, wantRev[i])
		}
	}
	if !reqs[1].res.Succeeded {
		t.Error("the transaction did not see the group's earlier put of a")
	}
	if reqs[2].added != 6 {
		t.Errorf("add returned %d, want 6", reqs[2].added)
	}
	recs := groupRecords(t, c)
	if len(recs) != 5 {
		t.Fatalf("%d records logged, want 5", len(recs))
	}
	for i, rec := range recs {
		if rec.Revision != Revision(i+1) {
			t.Errorf("record %d has revision %d, want %d", i, rec.Revision, i+1)
		}
	}
	if c.g.rev != 5 {
		t.Errorf("group revision %d, want 5", c.g.rev)
	}
	if m.Len() != 0 || m.Revision() != 0 {
		t.Fatalf("evaluation wrote the map: %d keys at revision %d", m.Len(), m.Revision())
	}
	c.lastRev = c.g.rev // as commit does once the group is logged
	c.apply(c.g.changes, c.g.rev)
	m.Build()
	got := map[string]string{}
	for e := range m.All(nil, nil) {
		got[string(e.Key)] = fmt.Sprintf("%s@%d", e.Value, e.ModRev)
	}
	want := map[string]string{"b": "x@2", "d": "current@4"}
	if fmt.Sprint(got) != fmt.Sprint(want) || m.Revision() != 5 {
		t.Errorf("after apply: %v at revision %d, want %v at 5", got, m.Revision(), want)
	}

	// The next group sees the applied map, not the last group's overlay.
	c.begin()
	r := single(PutOp([]byte("a"), []byte("again")))
	c.take(r)
	if r.err != nil || r.res.Revision != 6 {
		t.Errorf("next group: revision %d, %v; want 6", r.res.Revision, r.err)
	}
	if e := c.lookup([]byte("a")); e == nil || string(e.Value) != "again" || e.CreateRev != 6 {
		t.Errorf("next group: a is %+v, want a new key created at 6", e)
	}
}

// TestEvaluateBigTxn: a transaction of more than 8 operations (which
// keeps its own changes in a map) sees its own earlier operations.
func TestEvaluateBigTxn(t *testing.T) {
	c := testCommitter(record.NewMap())
	var ops []Op
	for i := range 10 {
		ops = append(ops, AddOp([]byte("n"), int64(i)))
	}
	r := &request{txn: Txn{Then: ops}}
	c.begin()
	c.take(r)
	if r.err != nil || r.res.Revision != 1 {
		t.Fatalf("revision %d, %v", r.res.Revision, r.err)
	}
	if e := c.lookup([]byte("n")); e == nil || string(e.Value) != "45" {
		t.Errorf("n is %+v, want 45", e)
	}
}

// TestEvaluateRevisionsExhausted: no record takes a revision past
// record.MaxRevision.
func TestEvaluateRevisionsExhausted(t *testing.T) {
	m := record.NewMap()
	m.SetRevision(record.MaxRevision - 1)
	c := testCommitter(m)
	c.begin()
	a, b := single(PutOp([]byte("a"), nil)), single(PutOp([]byte("b"), nil))
	c.take(a)
	c.take(b)
	if a.err != nil || a.res.Revision != record.MaxRevision {
		t.Errorf("last revision: %d, %v", a.res.Revision, a.err)
	}
	if !errors.Is(b.err, ErrRevisionsExhausted) || b.res.Committed {
		t.Errorf("past the last revision: %+v, %v", b.res, b.err)
	}
	if n := len(groupRecords(t, c)); n != 1 {
		t.Errorf("%d records logged, want 1", n)
	}
}

// TestFailedGroup: a group begun after the store failed evaluates
// nothing and answers every request ErrFailed, without the log.
func TestFailedGroup(t *testing.T) {
	c := testCommitter(record.NewMap())
	cause := errors.New("disk gone")
	c.failStop(cause)
	c.begin()
	reqs := []*request{single(PutOp([]byte("a"), nil)), single(PutOp([]byte("b"), nil))}
	for _, r := range reqs {
		r.done = make(chan struct{})
		c.take(r)
	}
	if len(c.g.changes) != 0 || len(c.buf) != 0 {
		t.Fatal("a failed store's group was evaluated")
	}
	c.commit()
	for i, r := range reqs {
		<-r.done
		if !errors.Is(r.err, ErrFailed) || !errors.Is(r.err, cause) {
			t.Errorf("request %d: %v", i, r.err)
		}
	}
}

// TestGatherTakesWaiting: gather takes every queued request, without
// waiting, up to maxBatch.
func TestGatherTakesWaiting(t *testing.T) {
	c := testCommitter(record.NewMap())
	c.lastSync = time.Hour // waiting would be allowed: it must not be needed
	c.gatherGap, c.gatherWait = time.Hour, time.Hour
	n := maxBatch + 10
	c.writers.Store(int64(n))
	for i := range n {
		c.reqs <- single(PutOp([]byte(fmt.Sprint(i)), nil))
	}
	c.begin()
	c.take(<-c.reqs)
	c.gather()
	if len(c.g.reqs) != maxBatch || len(c.reqs) != 10 {
		t.Errorf("group of %d, %d left queued; want %d and 10", len(c.g.reqs), len(c.reqs), maxBatch)
	}
	if c.g.rev != maxBatch {
		t.Errorf("group revision %d: each request was not evaluated as it came", c.g.rev)
	}
}

// TestGatherWaitsForWriters: with more writers inside write than
// requests queued, gather waits for them: one that arrives joins the
// group, and one that leaves without a request ends the wait, however
// long the gap allowed.
func TestGatherWaitsForWriters(t *testing.T) {
	c := testCommitter(record.NewMap())
	c.lastSync = time.Hour
	c.gatherGap, c.gatherWait = time.Hour, time.Hour
	c.writers.Store(3)
	c.begin()
	c.take(single(PutOp([]byte("first"), nil)))
	done := make(chan struct{})
	go func() { c.gather(); close(done) }()
	time.Sleep(10 * time.Millisecond) // gather is waiting by now, most likely
	select {
	case <-done:
		t.Fatal("gather returned with two of three writers in the group")
	default:
	}
	c.reqs <- single(PutOp([]byte("second"), nil)) // a writer on its way
	for len(c.reqs) > 0 {
		time.Sleep(time.Millisecond)
	}
	c.leave() // the third goes away
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("gather still waits a minute after the last writer left")
	}
	if len(c.g.reqs) != 2 {
		t.Errorf("group of %d requests, want 2", len(c.g.reqs))
	}
}

// TestGatherLoneWriter: with no more writers than requests, gather
// returns at once, even when it may wait.
func TestGatherLoneWriter(t *testing.T) {
	c := testCommitter(record.NewMap())
	c.lastSync = time.Hour
	c.gatherGap, c.gatherWait = time.Hour, time.Hour
	c.writers.Store(1)
	c.begin()
	c.take(single(PutOp([]byte("a"), nil)))
	c.gather() // would hang for an hour if it waited
	if len(c.g.reqs) != 1 {
		t.Errorf("group of %d", len(c.g.reqs))
	}
}

// TestAwaitNext: after a group, the committer polls for the next group's
// first request only while writers are inside write, and for at most
// gather's gap.
func TestAwaitNext(t *testing.T) {
	c := testCommitter(record.NewMap())
	c.lastSync = time.Hour
	c.gatherGap = time.Hour
	if r := c.awaitNext(); r != nil {
		t.Fatal("a request with no writer inside write")
	}
	c.writers.Store(1)
	want := single(PutOp([]byte("a"), nil))
	c.reqs <- want
	if r := c.awaitNext(); r != want {
		t.Fatalf("got %v, want the queued request", r)
	}
	// A writer that leaves ends the wait, however long the gap.
	done := make(chan *request)
	go func() { done <- c.awaitNext() }()
	time.Sleep(10 * time.Millisecond)
	c.leave()
	select {
	case r := <-done:
		if r != nil {
			t.Errorf("got %v after the writer left", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("awaitNext still waits a minute after the last writer left")
	}
	// The gap bounds it.
	c.writers.Store(1)
	c.gatherGap = time.Millisecond
	if r := c.awaitNext(); r != nil {
		t.Errorf("got %v with nothing queued", r)
	}
}
