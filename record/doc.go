// Package record defines what the store logs and how it applies it: the
// encoding of a committed record (put, delete, add, a transaction of
// several, a lease's grant, renewal or end), Map, the ordered in-memory
// state the records build, and Leases, the lease table they build beside
// it (lease.go).
//
// # Guarantees
//
// Every record carries its revision, one more than the record before it.
// Add is logged as its delta, never its result, so that applying a record
// twice shows in the map: that is what makes the crash tests meaningful.
// Map.Apply is atomic: a record that cannot apply (an add on a value that
// is not a decimal int64, an overflow) leaves the map unchanged. Decode
// never allocates more than the payload's size justifies.
//
// # Memory
//
// A Map appends each version of a key to an arena of byte chunks free of
// pointers (arena.go), finds keys through an open-addressing index of
// 8-byte slots (index.go) and orders them in a B-tree of pointers to the
// entries. A key costs its bytes plus 32 in the arena, 8–16 in the index
// and about 16 in the tree: 180 B for a 16-byte key with a 100-byte value,
// where a Go map of heap-allocated entries cost 276. Versions replaced or
// deleted stay in their chunk until the dead bytes pass half the live
// ones; then the chunk most dead is copied out, one chunk (at most 1 MiB)
// per change, and freed once no entry handed out still points into it.
//
// # Recovery
//
// A recovery fills a map deferred while empty (Map.Defer): no tree, only
// the index. Load leaves each entry out of the index until 16 more have
// come, its index slot prefetched meanwhile; Map.Prefetch lets the
// recovery do the same for the records it replays a few ahead; an index
// of a million keys is far bigger than the cache, and misses waited for
// together cost little more than one. BuildAsync then sorts and builds
// the tree on another goroutine while the map is in use: point lookups
// and changes need only the index, the tree takes the changes made
// meanwhile once built, and what needs the key order waits for it.
//
// # Usage
//
//	p := record.Append(nil, &record.Record{Revision: 1,
//		Ops: []record.Op{{Kind: record.KindAdd, Key: []byte("c"), Delta: 1}}})
//	rec, err := record.Decode(p)
//	m := record.NewMap()
//	err = m.Apply(&rec)
package record
