// Package kvapi is the store's API as an interface, KV, so that code
// written against it runs on the embedded store (Local) or on an etcd
// cluster (module github.com/kvstore/kv/etcd) without change. It uses
// package kv's own types: kv.Entry, kv.Txn, kv.Op, kv.Compare,
// kv.Fence, kv.TxnResult and kv.Revision.
//
// # Guarantees every implementation gives
//
// Package kvapitest checks each of these; an implementation passes its
// Run.
//
//   - Revisions are int64 and strictly increasing, one per committed
//     transaction; they never go backwards. They are the backend's own:
//     an empty embedded store is at revision 0 and its first write
//     commits at 1, an empty etcd cluster is at 1 and its first write
//     commits at 2.
//   - CreateRev, ModRev and Version mean what they mean in package kv: a
//     key created (absent, or deleted earlier in the same transaction) by
//     a put or an add gets the transaction's revision as CreateRev and
//     Version 1; each later change keeps CreateRev, sets ModRev and adds
//     one to Version.
//   - Txn is kv.Store.Txn: the fence first (kv.ErrFenced, nothing
//     written), then the compares, then Then or Else as one atomic step.
//     Compares of every target (value, version, create revision, mod
//     revision, existence) and relation evaluate as in package kv: an
//     absent key has revisions and version 0, and its value compares
//     only as NotEqual.
//   - Add (kv.AddOp, and the Add helper) adds to a decimal int64, a
//     missing key counting as 0, or fails with kv.ErrNotInteger or
//     kv.ErrOverflow and writes nothing.
//   - A write that returned without error is durable (the embedded store
//     under its default sync mode; a majority of the etcd cluster).
//   - Reads are linearizable: they see every write that returned before
//     they began.
//
// # Watch
//
// KV.Watch is kv.Store.Watch on every backend:
//
//   - Its events are kv.Events, one per operation that changed a key (a
//     put, an add with its sum, the delete of a key that existed), in
//     revision order and, within one transaction, in the transaction's
//     order. A delete's Entry has only Key and ModRev set. With
//     WatchOptions.Prev each event's Prev is the key's state before the
//     change, nil for a put that created it.
//   - Every committed change under the prefix at revision from or later
//     is yielded once, none is left out, none from before from. A change
//     is yielded only once it is durable: on the store once synced, on
//     etcd once committed by a majority.
//   - A watch from a revision older than the backend holds ends, before
//     any event, with a *kv.CompactedError (matching kv.ErrCompacted)
//     whose Requested is from and whose Oldest is the oldest revision a
//     watch can start from. One that fell behind a compaction ends the
//     same way, Requested the revision it needed next. Read the state
//     again with Range and watch from the revision Range saw, plus one.
//   - The end of ctx ends a watch with ctx's error, Close with
//     kv.ErrClosed.
//
// What a backend holds differs: the store holds the changes since it
// was opened, up to kv.Options.WatchHistoryBytes (a watcher that reads
// slower than the store writes falls behind it); etcd holds every change
// after its last compaction, which its operator or its
// auto-compaction schedules.
//
// Event entries may share memory with the backend (the store's watch
// history): don't modify them.
//
// # Leases
//
// Grant creates a lease; a put binds its key to it (kv.Op.WithLease in a
// transaction, or PutLease); KeepAlive renews it (KeepAliveLoop keeps
// renewing it); Revoke ends it. When a lease ends, revoked or not renewed
// for its TTL, its keys are deleted in one transaction, which a watch
// sees as their deletes, each with its previous value. On every backend:
//
//   - The lease does not end before the Deadline Grant or KeepAlive
//     returned, unless revoked: a holder may rely on its keys until then.
//   - An add keeps its key's lease; a put without one, or a delete,
//     unbinds the key. Only a put takes a lease (kv.ErrInvalid).
//   - An operation on a lease that has ended (revoked, expired, never
//     granted), and a transaction whose branch taken puts on one, fails
//     with an error matching kv.ErrLeaseNotFound and writes nothing.
//
// # Where a backend may differ
//
// These differences are documented by kvapitest, which accepts either
// behaviour:
//
//   - A transaction whose branch taken writes one key twice (a put and a
//     delete of one key, two puts) commits in the embedded store, each
//     operation seeing the ones before it; etcd refuses it, and its
//     adapter returns ErrUnsupported, writing nothing.
//   - A branch taken whose operations change nothing (deletes of absent
//     keys) commits an empty record with a revision of its own in the
//     embedded store (Committed true); etcd does not bump its revision for
//     it (Committed false, Revision the current one).
//   - The embedded store logs every lease operation with a revision of its
//     own: a grant, a renewal, a revoke or an expiry, with keys or none.
//     etcd commits a revision only for the end of a lease that had keys,
//     the one that deletes them; a revoke of a lease without keys returns
//     the current revision.
//   - The embedded store's TTLs and deadlines are exact (its Deadline is
//     the one it logged, and from it on no read returns the lease's keys);
//     etcd rounds a TTL up to whole seconds and to the cluster's minimum,
//     its Deadline is the time the request was sent plus the TTL, and its
//     keys stay readable until the leader commits the expiry, a moment
//     after the lease's end. The embedded store's error says when a lease
//     expired (kv.ErrLeaseExpired); etcd's says only that it was not
//     found.
//
// # Errors
//
// kv.ErrNotFound (Get, Delete), kv.ErrFenced, kv.ErrNotInteger,
// kv.ErrOverflow, kv.ErrInvalid, kv.ErrTooLarge, kv.ErrCompacted,
// kv.ErrLeaseNotFound and kv.ErrClosed keep
// their meaning on every backend: a write that returned one of them
// wrote nothing. A write that failed with an error matching
// ErrUnknownOutcome (a timeout, a lost connection, a failed store) may or
// may not have committed: read again before acting, and never retry it
// blindly. The helpers here never retry such a write.
//
// # Usage
//
//	var db kvapi.KV = kvapi.Local(store) // or etcdkv.New(client, nil)
//	rev, err := kvapi.Put(ctx, db, []byte("k"), []byte("v"))
//	e, err := db.Get(ctx, []byte("k"))
//	n, _, err := kvapi.Add(ctx, db, []byte("counter"), 1)
//	res, err := db.Txn(ctx, kv.Txn{If: []kv.Compare{kv.Absent(k)}, Then: []kv.Op{kv.PutOp(k, v)}})
//	_, err = kvapi.Fenced(db, kv.Fence{Key: lock, Token: token}).Put(ctx, k, v)
//	for ev, err := range db.Watch(ctx, []byte("jobs/"), rev+1, nil) { ... }
//	lease, err := db.Grant(ctx, 10*time.Second)
//	_, err = kvapi.PutLease(ctx, db, []byte("nodes/n1"), addr, lease.ID)
//	go kvapi.KeepAliveLoop(ctx, db, lease.ID)
package kvapi
