package kvapitest

import (
	"context"
	"errors"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// grant grants a lease of ttl and checks what Grant returned: an id, a
// TTL of at least ttl, and a Deadline no earlier than the call's start
// plus ttl and no later than its end plus the TTL granted.
func (s *suite) grant(ttl time.Duration) kv.LeaseInfo {
	s.t.Helper()
	start := time.Now()
	info, err := s.db.Grant(s.ctx(), ttl)
	end := time.Now()
	if err != nil {
		s.t.Fatalf("Grant(%v): %v", ttl, err)
	}
	if info.ID == 0 || info.TTL < ttl || info.Deadline.Before(start.Add(ttl)) || info.Deadline.After(end.Add(info.TTL)) {
		s.t.Errorf("Grant(%v) between %v and %v: %+v; want an id, a TTL of at least %v, a deadline from the start plus %v to the end plus the TTL",
			ttl, start.Format(time.StampMicro), end.Format(time.StampMicro), info, ttl, ttl)
	}
	return info
}

// leaseRevs says, with t.Log, whether a lease operation that deleted no
// key committed a revision (the store logs every lease operation; etcd
// commits a revision only for the deletes), and checks that it is one
// of the two.
func (s *suite) leaseRevs(what string, before kv.Revision) {
	s.t.Helper()
	switch after := s.rev(); after {
	case before:
		s.t.Logf("%s commits no revision", what)
	case before + 1:
		s.t.Logf("%s commits a revision of its own", what)
	default:
		s.t.Errorf("%s: revision %d after %d, want it unchanged or one more", what, after, before)
	}
}

// wantLeaseEnded checks that err matches kv.ErrLeaseNotFound.
func (s *suite) wantLeaseEnded(what string, err error) {
	s.t.Helper()
	if !errors.Is(err, kv.ErrLeaseNotFound) {
		s.t.Errorf("%s: %v, want kv.ErrLeaseNotFound", what, err)
	}
}

// testLeaseRevoke: keys put on a lease (PutLease, kv.Op.WithLease in a
// transaction) are deleted by its Revoke, in one transaction at the
// revision Revoke returns, and a watch sees each delete with the value
// it had; a key of the same transaction put without the lease stays.
// An ended lease is kv.ErrLeaseNotFound for KeepAlive, Revoke and a put
// on it, which writes nothing, unless the put is in the branch not
// taken.
func testLeaseRevoke(s *suite) {
	before := s.rev()
	info := s.grant(time.Minute)
	s.leaseRevs("a grant", before)
	from := s.rev() + 1
	w := s.watch(s.key(""), from, &kvapi.WatchOptions{Prev: true})
	r1, err := kvapi.PutLease(s.ctx(), s.db, s.key("k1"), []byte("v1"), info.ID)
	if err != nil {
		s.t.Fatalf("PutLease: %v", err)
	}
	res := s.txn(kv.Txn{Then: []kv.Op{kv.PutOp(s.key("k2"), []byte("v2")).WithLease(info.ID), kv.PutOp(s.key("k3"), []byte("v3"))}})
	if res.Revision != r1+1 {
		s.t.Errorf("a put on a lease in a transaction at %d, want %d", res.Revision, r1+1)
	}
	s.want("k1", "v1", r1, r1, 1)
	rrev, err := s.db.Revoke(s.ctx(), info.ID)
	if err != nil {
		s.t.Fatalf("Revoke: %v", err)
	}
	if rrev != res.Revision+1 {
		s.t.Errorf("Revoke at revision %d, want %d, the next", rrev, res.Revision+1)
	}
	s.wantRev(rrev, "after Revoke")
	s.want("k1", "-", 0, 0, 0)
	s.want("k2", "-", 0, 0, 0)
	s.want("k3", "v3", res.Revision, res.Revision, 1)
	s.put("marker", "")
	got := w.until(s.key("marker"))
	k1 := kv.Entry{Key: s.key("k1"), Value: []byte("v1"), CreateRev: r1, ModRev: r1, Version: 1}
	k2 := kv.Entry{Key: s.key("k2"), Value: []byte("v2"), CreateRev: res.Revision, ModRev: res.Revision, Version: 1}
	k3 := kv.Entry{Key: s.key("k3"), Value: []byte("v3"), CreateRev: res.Revision, ModRev: res.Revision, Version: 1}
	want := []kv.Event{
		{Type: kv.EventPut, Entry: k1},
		{Type: kv.EventPut, Entry: k2},
		{Type: kv.EventPut, Entry: k3},
		{Type: kv.EventDelete, Entry: kv.Entry{Key: k1.Key, ModRev: rrev}, Prev: &k1},
		{Type: kv.EventDelete, Entry: kv.Entry{Key: k2.Key, ModRev: rrev}, Prev: &k2},
	}
	if evStrings(got) != evStrings(want) {
		s.t.Errorf("events%s\nwant%s", evStrings(got), evStrings(want))
	}

	// The lease has ended.
	before = s.rev()
	_, err = s.db.Revoke(s.ctx(), info.ID)
	s.wantLeaseEnded("Revoke of a revoked lease", err)
	_, err = s.db.KeepAlive(s.ctx(), info.ID)
	s.wantLeaseEnded("KeepAlive of a revoked lease", err)
	_, err = kvapi.PutLease(s.ctx(), s.db, s.key("k1"), []byte("late"), info.ID)
	s.wantLeaseEnded("PutLease on a revoked lease", err)
	_, err = s.db.Txn(s.ctx(), kv.Txn{Then: []kv.Op{kv.PutOp(s.key("k4"), nil), kv.PutOp(s.key("k1"), []byte("late")).WithLease(info.ID)}})
	s.wantLeaseEnded("a transaction putting on a revoked lease", err)
	s.wantRev(before, "puts on a revoked lease")
	s.want("k1", "-", 0, 0, 0)
	s.want("k4", "-", 0, 0, 0)
	res = s.txn(kv.Txn{
		If:   []kv.Compare{kv.Absent(s.key("k3"))},
		Then: []kv.Op{kv.PutOp(s.key("k1"), []byte("late")).WithLease(info.ID)},
		Else: []kv.Op{kv.PutOp(s.key("else"), nil)},
	})
	if res.Succeeded || res.Revision != before+1 {
		s.t.Errorf("a revoked lease in the branch not taken: %+v, want Else at %d", res, before+1)
	}

	// A lease without keys.
	before = s.rev()
	empty := s.grant(time.Minute)
	s.leaseRevs("a grant", before)
	before = s.rev()
	if _, err := s.db.Revoke(s.ctx(), empty.ID); err != nil {
		s.t.Fatalf("Revoke of a lease without keys: %v", err)
	}
	s.leaseRevs("a revoke of a lease without keys", before)
}

// testLeaseBinding: an add (kv.AddOp, kvapi.Add) keeps its key's lease,
// a put without one unbinds the key, a delete and a new put without one
// leave the key to itself; only a put takes a lease (kv.ErrInvalid for
// an add).
func testLeaseBinding(s *suite) {
	info := s.grant(time.Minute)
	for _, k := range []string{"added", "txn-added", "unbound", "recreated"} {
		if _, err := kvapi.PutLease(s.ctx(), s.db, s.key(k), []byte("1"), info.ID); err != nil {
			s.t.Fatalf("PutLease(%s): %v", k, err)
		}
	}
	if _, _, err := kvapi.Add(s.ctx(), s.db, s.key("added"), 2); err != nil {
		s.t.Fatalf("Add: %v", err)
	}
	s.txn(kv.Txn{Then: []kv.Op{kv.AddOp(s.key("txn-added"), 4)}})
	s.put("unbound", "2")
	if _, err := kvapi.Delete(s.ctx(), s.db, s.key("recreated")); err != nil {
		s.t.Fatal(err)
	}
	r := s.put("recreated", "3")
	before := s.rev()
	addOn := kv.AddOp(s.key("n"), 1)
	addOn.Lease = info.ID
	_, err := s.db.Txn(s.ctx(), kv.Txn{Then: []kv.Op{addOn}})
	if !errors.Is(err, kv.ErrInvalid) {
		s.t.Errorf("an add on a lease: %v, want kv.ErrInvalid", err)
	}
	s.wantRev(before, "an add on a lease")
	if _, err := s.db.Revoke(s.ctx(), info.ID); err != nil {
		s.t.Fatal(err)
	}
	s.want("added", "-", 0, 0, 0)
	s.want("txn-added", "-", 0, 0, 0)
	if e, ok := s.get("unbound"); !ok || string(e.Value) != "2" {
		s.t.Errorf("a key put again without the lease: %q, %v; want it kept", e.Value, ok)
	}
	s.want("recreated", "3", r, r, 1)
}

// testLeaseExpiry: a lease not kept alive ends by itself after its TTL,
// no earlier than its Deadline: its keys are deleted, a watch sees the
// deletes, and the lease is kv.ErrLeaseNotFound.
func testLeaseExpiry(s *suite) {
	info := s.grant(time.Second)
	r1, err := kvapi.PutLease(s.ctx(), s.db, s.key("a"), []byte("1"), info.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	r2, err := kvapi.PutLease(s.ctx(), s.db, s.key("b"), []byte("2"), info.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	w := s.watch(s.key(""), r2+1, &kvapi.WatchOptions{Prev: true})
	var got []kv.Event
	for len(got) < 2 {
		ev, err, ok := w.next()
		if !ok {
			s.t.Fatalf("the watch ended before the expiry: %v", err)
		}
		got = append(got, ev)
	}
	if now := time.Now(); now.Before(info.Deadline) {
		s.t.Errorf("the lease's keys deleted at %v, before its deadline %v", now.Format(time.StampMicro), info.Deadline.Format(time.StampMicro))
	}
	a := kv.Entry{Key: s.key("a"), Value: []byte("1"), CreateRev: r1, ModRev: r1, Version: 1}
	b := kv.Entry{Key: s.key("b"), Value: []byte("2"), CreateRev: r2, ModRev: r2, Version: 1}
	rev := got[0].Revision()
	want := []kv.Event{
		{Type: kv.EventDelete, Entry: kv.Entry{Key: a.Key, ModRev: rev}, Prev: &a},
		{Type: kv.EventDelete, Entry: kv.Entry{Key: b.Key, ModRev: rev}, Prev: &b},
	}
	if evStrings(got) != evStrings(want) || rev <= r2 {
		s.t.Errorf("the expiry's events%s\nwant, at one revision after %d,%s", evStrings(got), r2, evStrings(want))
	}
	s.want("a", "-", 0, 0, 0)
	s.want("b", "-", 0, 0, 0)
	_, err = s.db.KeepAlive(s.ctx(), info.ID)
	s.wantLeaseEnded("KeepAlive of an expired lease", err)
	_, err = kvapi.PutLease(s.ctx(), s.db, s.key("a"), []byte("late"), info.ID)
	s.wantLeaseEnded("PutLease on an expired lease", err)
}

// testLeaseKeepAlive: renewals keep a lease, and its keys, past the
// deadline it was granted with; each moves the deadline to at least its
// call plus the TTL, never back; KeepAliveLoop renews until its context
// ends.
func testLeaseKeepAlive(s *suite) {
	const ttl = 2 * time.Second
	info := s.grant(ttl)
	if _, err := kvapi.PutLease(s.ctx(), s.db, s.key("k"), []byte("v"), info.ID); err != nil {
		s.t.Fatal(err)
	}
	first, last := info.Deadline, info.Deadline
	for time.Now().Before(first.Add(500 * time.Millisecond)) {
		start := time.Now()
		got, err := s.db.KeepAlive(s.ctx(), info.ID)
		if err != nil {
			s.t.Fatalf("KeepAlive: %v", err)
		}
		if got.ID != info.ID || got.TTL != info.TTL || got.Deadline.Before(start.Add(ttl)) || got.Deadline.Before(last) {
			s.t.Errorf("KeepAlive at %v: %+v; want the deadline at least then plus %v, and at least %v", start.Format(time.StampMicro), got, ttl, last.Format(time.StampMicro))
		}
		last = got.Deadline
		time.Sleep(200 * time.Millisecond)
	}
	if _, ok := s.get("k"); !ok {
		s.t.Errorf("the key is gone past the first deadline, though the lease was renewed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- kvapi.KeepAliveLoop(ctx, s.db, info.ID) }()
	time.Sleep(ttl + 300*time.Millisecond)
	if _, ok := s.get("k"); !ok {
		s.t.Errorf("the key is gone though KeepAliveLoop ran")
	}
	cancel()
	if err := <-done; !errors.Is(err, ctx.Err()) {
		s.t.Errorf("KeepAliveLoop after cancel: %v", err)
	}
	if _, err := s.db.Revoke(s.ctx(), info.ID); err != nil {
		s.t.Fatal(err)
	}
	s.want("k", "-", 0, 0, 0)
	// KeepAliveLoop ends with the lease.
	if err := kvapi.KeepAliveLoop(s.ctx(), s.db, info.ID); !errors.Is(err, kv.ErrLeaseNotFound) {
		s.t.Errorf("KeepAliveLoop of a revoked lease: %v, want kv.ErrLeaseNotFound", err)
	}
}

// testLeaseInvalid: a TTL of 0, below or past kv.MaxLeaseTTL is
// kv.ErrInvalid; a lease never granted is kv.ErrLeaseNotFound; after
// Close, kv.ErrClosed.
func testLeaseInvalid(s *suite) {
	before := s.rev()
	for _, ttl := range []time.Duration{0, -time.Second, kv.MaxLeaseTTL + time.Second} {
		if _, err := s.db.Grant(s.ctx(), ttl); !errors.Is(err, kv.ErrInvalid) {
			s.t.Errorf("Grant(%v): %v, want kv.ErrInvalid", ttl, err)
		}
	}
	const never = kv.LeaseID(1<<62 + 12345)
	_, err := s.db.KeepAlive(s.ctx(), never)
	s.wantLeaseEnded("KeepAlive of a lease never granted", err)
	_, err = s.db.Revoke(s.ctx(), never)
	s.wantLeaseEnded("Revoke of a lease never granted", err)
	_, err = kvapi.PutLease(s.ctx(), s.db, s.key("k"), nil, never)
	s.wantLeaseEnded("PutLease on a lease never granted", err)
	s.wantRev(before, "invalid lease calls")
	info := s.grant(time.Minute)
	if _, err := s.db.Revoke(s.ctx(), info.ID); err != nil {
		s.t.Fatal(err)
	}
	if err := s.db.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.closed = true
	if _, err := s.db.Grant(s.ctx(), time.Minute); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("Grant after Close: %v", err)
	}
	if _, err := s.db.KeepAlive(s.ctx(), info.ID); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("KeepAlive after Close: %v", err)
	}
	if _, err := s.db.Revoke(s.ctx(), info.ID); !errors.Is(err, kv.ErrClosed) {
		s.t.Errorf("Revoke after Close: %v", err)
	}
}
