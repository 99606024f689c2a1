// Package lockstore is the small set of store operations that package
// filelock needs: point reads, a range by prefix, transactions with
// compares on a key's create revision, mod revision and existence, fenced
// writes, a wait for a change, and (Leaser) keys bound to leases. The kv store implements it through an
// adapter in package filelock; an etcd client can implement it as well
// (Get, Range with a prefix end, Txn, Watch), so that the lock logic,
// which sees only this interface, runs on either.
//
// # Guarantees an implementation must give
//
//   - Revisions are int64, strictly increasing with every committed
//     transaction, and never go backwards, across crashes and repairs:
//     the lock library hands them out as fencing tokens.
//   - A Txn is atomic: its compares and its fence are evaluated against
//     everything committed before it, and its operations commit with
//     one revision, all or none.
//   - A Put of a key that is absent (or that an earlier operation of the
//     same Txn deleted) creates it: its CreateRev is the Txn's revision.
//     A Put of a present key keeps its CreateRev. (etcd refuses a delete
//     and a put of one key in one transaction; its backend expresses
//     "Delete(k), Put(k)" as a delete under the Txn's compares followed by
//     a create under Absent(k), which loses the one-transaction takeover
//     but none of the safety: see package filelock.)
//   - A read returns only what is durable: a revision it shows is never
//     taken back by a crash.
//
// # Crash contract
//
// A Txn that returned without error is durable. One that returned an
// error may or may not have committed, as after a timeout: callers read
// again and rely on compares, never on having seen the error.
//
// # Usage
//
//	res, err := b.Txn(ctx, lockstore.Txn{
//		If:   []lockstore.Compare{lockstore.Absent(key)},
//		Then: []lockstore.Op{lockstore.Put(key, marker)},
//	})
//	token := res.Revision // if res.Succeeded: the key's create revision
package lockstore
