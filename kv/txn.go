package kv

import (
	"bytes"

	"github.com/kvstore/kv/record"
)

// Revision numbers committed records; see record.Revision. Revisions are
// global, one per committed record, strictly increasing, and never go
// backwards across crashes, so a revision is a safe fencing token.
type Revision = record.Revision

// Entry is a key's state as Get and Scan return it. Its Key and Value
// share memory with the store and must not be modified. They never change
// while held, and holding them keeps the part of the store's memory they
// are in (up to 1 MiB) from being freed: copy a value that is kept for
// long after the key changes. A Scan whose loop has not ended holds more:
// every part that held a live entry when it started (see Store.Scan).
type Entry = record.Entry

// Op is one operation of a transaction; build it with Put, Delete or
// AddOp.
type Op = record.Op

// PutOp sets key to value.
func PutOp(key, value []byte) Op { return Op{Kind: record.KindPut, Key: key, Value: value} }

// DeleteOp removes key; a missing key is not an error inside a
// transaction.
func DeleteOp(key []byte) Op { return Op{Kind: record.KindDelete, Key: key} }

// AddOp adds delta to key's decimal integer value (a missing key counts as
// 0).
func AddOp(key []byte, delta int64) Op { return Op{Kind: record.KindAdd, Key: key, Delta: delta} }

// Compare is one guard of a transaction; build it with the Compare
// functions below.
type Compare = record.Compare

// Cmp is the relation of a Compare.
type Cmp = record.Cmp

// Relations for the Compare functions.
const (
	Equal    = record.CmpEqual
	NotEqual = record.CmpNotEqual
	Less     = record.CmpLess
	Greater  = record.CmpGreater
)

// CompareValue compares key's value with value, bytewise (a missing key
// compares as absent: only NotEqual holds).
func CompareValue(key []byte, c Cmp, value []byte) Compare {
	return Compare{Key: key, Target: record.TargetValue, Cmp: c, Value: value}
}

// CompareModRev compares the revision that last changed key (0 if absent)
// with rev. Revisions are at most record.MaxRevision, the largest int64,
// so the compare's int64 holds every one.
func CompareModRev(key []byte, c Cmp, rev Revision) Compare {
	return Compare{Key: key, Target: record.TargetModRev, Cmp: c, Num: int64(rev)}
}

// CompareCreateRev compares the revision that created key (0 if absent)
// with rev.
func CompareCreateRev(key []byte, c Cmp, rev Revision) Compare {
	return Compare{Key: key, Target: record.TargetCreateRev, Cmp: c, Num: int64(rev)}
}

// CompareVersion compares key's version (changes since creation, 0 if
// absent) with n.
func CompareVersion(key []byte, c Cmp, n int64) Compare {
	return Compare{Key: key, Target: record.TargetVersion, Cmp: c, Num: n}
}

// Exists holds when key exists.
func Exists(key []byte) Compare {
	return Compare{Key: key, Target: record.TargetExists, Cmp: record.CmpEqual, Num: 1}
}

// Absent holds when key does not exist.
func Absent(key []byte) Compare {
	return Compare{Key: key, Target: record.TargetExists, Cmp: record.CmpEqual, Num: 0}
}

// FenceBy says which revision of the fence key a Fence compares.
type FenceBy uint8

// Fence comparisons.
const (
	// FenceCreateRev compares the revision that created the fence key: the
	// revision a lock holder got when it acquired the lock by creating the
	// key. Updates by the holder keep it; a new holder re-creates the key
	// and changes it. The default.
	FenceCreateRev FenceBy = iota
	// FenceModRev compares the revision that last changed the fence key.
	FenceModRev
)

// Fence guards a write with a fencing token: the write commits only if
// the fence key exists and its revision (FenceBy) equals Token, checked in
// the same atomic step as the write. Otherwise the write fails with
// ErrFenced and nothing is written.
type Fence struct {
	Key   []byte
	Token Revision
	By    FenceBy
}

// Txn is a transaction: if every compare in If holds, the operations in
// Then are applied, otherwise those in Else, atomically as one record with
// one revision. Compares are evaluated in commit order against everything
// committed before, including earlier writes of the same group commit. A
// Fence, if set, is checked first: when it fails the transaction fails
// with ErrFenced, whatever its compares.
//
// ThenRead and ElseRead are the reads of each branch (GetRead,
// RangeRead, PrefixRead), as etcd's transactions hold range requests:
// the branch taken reads at the transaction's place in the commit order,
// atomically with its compares and writes, and the results come back in
// TxnResult.Reads. The reads see what the compares saw: every write
// committed before the transaction, and none of its own writes (etcd's
// reads see the writes listed before them in the branch; read a key
// before writing it here, or compute what the write makes of it).
type Txn struct {
	If       []Compare
	Then     []Op
	Else     []Op
	ThenRead []Read
	ElseRead []Read
	Fence    *Fence
}

// TxnResult is the outcome of a transaction.
type TxnResult struct {
	// Succeeded reports whether the compares held (Then ran).
	Succeeded bool
	// Revision is the revision the transaction committed at, or the
	// store's revision when the branch taken had no operations and nothing
	// was committed.
	Revision Revision
	// Committed reports whether a record was written.
	Committed bool
	// Reads are the results of the branch's reads (ThenRead or ElseRead),
	// in their order.
	Reads []ReadResult
}

// holds evaluates c against e (nil when the key is absent).
func holds(c *Compare, e *record.Entry) bool {
	if c.Target == record.TargetValue {
		if e == nil {
			return c.Cmp == record.CmpNotEqual
		}
		return relate(bytes.Compare(e.Value, c.Value), c.Cmp)
	}
	var n int64
	if e != nil {
		switch c.Target {
		case record.TargetCreateRev:
			n = int64(e.CreateRev)
		case record.TargetModRev:
			n = int64(e.ModRev)
		case record.TargetVersion:
			n = e.Version
		case record.TargetExists:
			n = 1
		}
	}
	switch {
	case n < c.Num:
		return relate(-1, c.Cmp)
	case n > c.Num:
		return relate(1, c.Cmp)
	}
	return relate(0, c.Cmp)
}

func relate(sign int, c Cmp) bool {
	switch c {
	case record.CmpEqual:
		return sign == 0
	case record.CmpNotEqual:
		return sign != 0
	case record.CmpLess:
		return sign < 0
	case record.CmpGreater:
		return sign > 0
	}
	return false
}
