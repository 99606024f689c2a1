// Package etcdlock runs the lock library (package filelock) on an etcd
// cluster: Backend implements lockstore.Backend and lockstore.Leaser
// with an etcd client, and NewLocker returns a filelock.Locker on it.
//
// # Guarantees
//
// Everything package filelock guarantees that does not rest on one host:
// exactly one winner per free slot (a transaction with compares on the
// slot key's revisions), fencing tokens that never go backwards (the
// slot key's create revision: a revision of the cluster, which never
// goes backwards while the cluster keeps a majority), fenced writes that
// commit only while the token is current (etcd transactions comparing
// the slot key's create revision, kv.ErrFenced otherwise), and release,
// extend and sweep that never touch a successor's key.
//
// # Liveness is a lease
//
// A holder cannot be judged across hosts by a pid or a kernel lock. Under
// the Lease strategy (the default here) each Locker grants an etcd lease
// (Options.TTL) and keeps it alive; its holders' slot keys, and its
// waiters' keys, are bound to it. When the process dies, pauses or loses
// the cluster for longer than the TTL, etcd deletes the keys, and the
// next acquirer takes the slot with a larger token. A holder that was
// only paused may wake up still believing it holds the lock: its fenced
// writes then fail with kv.ErrFenced, its release and extend with
// filelock.ErrLockLost, and Holder.Lost is closed. Writes that are not
// fenced are not protected: give the token to everything the lock
// guards.
//
// # What differs from the kv store
//
//   - etcd refuses a put and a delete of one key in one transaction. A
//     takeover (delete the dead holder's key, create it anew) is sent as
//     two: the delete under the transaction's compares, then the create
//     under Absent. Of racing acquirers still exactly one creates the key;
//     a takeover that loses the second step reads again, as after any
//     lost race. Under the Lease strategy no takeover happens: a dead
//     holder's key is deleted by its lease's end.
//   - Wait is kvapi's watch (etcdkv.KV.Watch) of the lock's prefix from
//     the revision after the one read: it misses no change, rides out a
//     member that lost its leader, and a compacted revision wakes it at
//     once (TestWait).
//   - Revisions, and so tokens, are the cluster's: they do not carry over
//     from a kv store.
//
// # Usage
//
//	l, err := etcdlock.NewLocker(cli, nil)
//	defer l.Close()                         // revokes the lease
//	h, err := l.Acquire(ctx, "shard-7")
//	defer h.Release()
//	_, err = h.Put(ctx, "shard-7/state", v) // fenced: kv.ErrFenced once lost
package etcdlock
