// Package record defines what the store logs and how it applies it: the
// encoding of a committed record (put, delete, add, or a transaction of
// several), and Map, the ordered in-memory state the records build.
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
// # Usage
//
//	p := record.Append(nil, &record.Record{Revision: 1,
//		Ops: []record.Op{{Kind: record.KindAdd, Key: []byte("c"), Delta: 1}}})
//	rec, err := record.Decode(p)
//	m := record.NewMap()
//	err = m.Apply(&rec)
package record
