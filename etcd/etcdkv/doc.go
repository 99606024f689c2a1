// Package etcdkv is kvapi.KV on an etcd cluster (go.etcd.io/etcd/client/v3):
// the embedded store's API, with its semantics, past one machine. Code
// written against kvapi.KV moves from kvapi.Local to New unchanged; the
// conformance suite (package kvapitest) runs on both.
//
// # Guarantees
//
// A write that returned without error is committed by a majority of the
// cluster and durable there. Reads are linearizable (etcd's default,
// through the leader's read index): they see every write that returned
// before they began. Transactions keep kv.Store.Txn's semantics (the
// fence, then the compares, then Then or Else, atomically), built as
// described below. A watch yields every committed change under its
// prefix from its revision on, once, in order, through a killed or
// paused leader and a member left without one (TestWatchLeaderFaults).
//
// # What differs from the embedded store, and how it is handled
//
//   - Revisions are the cluster's. An empty cluster is at revision 1 and
//     its first write commits at 2 (the embedded store: 0 and 1). Every
//     transaction that changes a key commits one revision; a lease grant,
//     keep-alive, compaction or leader change commits none; a lease that
//     is revoked or expires with keys attached commits one revision
//     deleting them all (TestRevisionsAreTheClusters). Revisions of one
//     cluster never go backwards: they are safe fencing tokens. They do
//     not carry over from an embedded store or another cluster.
//   - A branch taken whose operations change nothing (deletes of absent
//     keys) commits no revision: Committed is false and Revision the
//     current one, where the embedded store commits an empty record.
//   - etcd refuses a transaction that writes one key twice in one branch
//     (a put and a delete, two puts). Its semantics in the embedded store
//     (each operation sees the ones before) cannot be expressed in one
//     etcd transaction, so such a transaction fails with
//     kvapi.ErrUnsupported, before anything is sent.
//   - etcd has no add. An add (kv.AddOp, kvapi.Add) reads its key, computes
//     the sum as the embedded store does (kvapi.NextValue), and commits it
//     as a put under a compare on the key's mod revision; when that
//     compare fails (another write came between), it reads again, up to
//     Options.MaxAttempts. It is never retried after an error: a write
//     whose outcome is unknown is returned as it is, so an add is never
//     applied twice. The log records the sum, not the delta.
//   - etcd evaluates a value compare on an absent key as false, NotEqual
//     included; package kv evaluates NotEqual as true. A transaction with
//     a value compare by NotEqual reads that key first, evaluates the
//     compare itself, and guards the key's mod revision as an add does.
//   - A fence is a level of its own around the transaction, so that a
//     failed fence is told from a failed compare (below).
//   - Watch is an etcd watch of the prefix. Its history is what the
//     cluster's last compaction left (the embedded store's: the changes
//     since its open, in memory): a watch from the compaction revision C
//     or older ends with a *kv.CompactedError whose Oldest is C+1, as one
//     from before a store's open does. The adapter asks etcd for the
//     revision before the one asked and drops it, so that the compaction
//     revision itself counts as compacted on every etcd release (a watch
//     from it dropped a delete before etcd-io/etcd#18089 was fixed).
//     KV.Watch says how it rides out a lost member or leader.
//   - Leases are etcd's: Grant rounds a TTL up to whole seconds (and the
//     cluster to its minimum), and the Deadline it returns is the time it
//     sent the request plus the TTL, which the lease outlives. Only the
//     end of a lease with keys commits a revision. A put on a lease is a
//     put WithLease; an add on a key keeps its lease (the put of its sum
//     is WithIgnoreLease when the key exists). etcd's "lease not found"
//     is a *kv.LeaseError, matching kv.ErrLeaseNotFound (never
//     kv.ErrLeaseExpired: etcd does not say why).
//
// # How a transaction is built
//
// One etcd transaction, nested:
//
//	if fence { if guards { if compares { Then } else { Else } } }
//
// The fence compares the fence key's create (or mod) revision with the
// token, and its create revision with 0 (the key exists); when it fails
// the result is kv.ErrFenced and nothing is written. The guards are the
// mod revisions of the keys read first (adds, value compares by
// NotEqual), when there are any: when one fails, the transaction is
// read and sent again. Each level is left out when it has nothing to
// check. An add whose branch cannot apply (kv.ErrNotInteger,
// kv.ErrOverflow) is sent as an empty branch: taking it writes nothing
// and returns the add's error.
//
// # Errors
//
// kv.ErrNotFound, kv.ErrFenced, kv.ErrNotInteger, kv.ErrOverflow,
// kv.ErrInvalid and kv.ErrClosed as in package kv; kv.ErrTooLarge for a
// transaction etcd refuses as too large or as having too many operations
// (128 per level by default); kvapi.ErrUnsupported as above. A write that
// failed with any error that does not prove etcd refused it before
// proposing it (a timeout, a lost connection, "leader changed") matches
// kvapi.ErrUnknownOutcome, and wraps the client's error: it may or may
// not have committed. A watch from a compacted revision, or one that
// fell behind a compaction, ends with a *kv.CompactedError (matching
// kv.ErrCompacted), as on the store.
//
// # Usage
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	if err != nil { ... }
//	defer cli.Close()
//	var db kvapi.KV = etcdkv.New(cli, nil)
//	rev, err := kvapi.Put(ctx, db, []byte("k"), []byte("v"))
//	n, _, err := kvapi.Add(ctx, db, []byte("counter"), 1)
package etcdkv
