package kv

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/kvstore/kv/record"
)

// Read is a read inside a transaction, as etcd's transactions hold range
// requests: the entry of one key (GetRead), or the entries of a range of
// keys in key order (RangeRead, PrefixRead). Txn.ThenRead and
// Txn.ElseRead hold the reads of each branch; TxnResult.Reads their
// results.
type Read struct {
	// Key is the key of a Get, or the first key of a Range.
	Key []byte
	// End, for a Range, bounds it: keys in [Key, End); nil means no
	// upper bound.
	End []byte
	// Range reads every key in [Key, End) instead of Key alone.
	Range bool
	// Limit bounds a Range's entries; 0 means no bound.
	Limit int
}

// GetRead reads key's entry.
func GetRead(key []byte) Read { return Read{Key: key} }

// RangeRead reads the entries with start <= key < end, in key order, at
// most limit of them (0: all); a nil end means no upper bound.
func RangeRead(start, end []byte, limit int) Read {
	return Read{Key: start, End: end, Range: true, Limit: limit}
}

// PrefixRead reads the entries whose key starts with prefix, in key
// order, at most limit of them (0: all).
func PrefixRead(prefix []byte, limit int) Read {
	return RangeRead(prefix, prefixEnd(prefix), limit)
}

// ReadResult is the outcome of one Read.
type ReadResult struct {
	// Entries are the entries read: for a Get, the key's entry, or none
	// when it does not exist; for a Range, the entries in key order. They
	// are copies the caller owns.
	Entries []Entry
	// More reports that a Range stopped at its Limit with more keys left.
	More bool
}

// empty reports whether t does nothing at all: no compare, no fence, no
// operation and no read.
func (t *Txn) empty() bool {
	return len(t.Then) == 0 && len(t.Else) == 0 && t.Fence == nil && len(t.If) == 0 &&
		len(t.ThenRead) == 0 && len(t.ElseRead) == 0
}

// checkReads validates the reads of t: a Get needs a key, a Limit is
// not negative.
func checkReads(t *Txn, maxKey int) error {
	for _, reads := range [][]Read{t.ThenRead, t.ElseRead} {
		for i := range reads {
			rd := &reads[i]
			switch {
			case !rd.Range && len(rd.Key) == 0:
				return fmt.Errorf("%w: empty key", ErrInvalid)
			case len(rd.Key) > maxKey && !rd.Range:
				return fmt.Errorf("%w: key of %d bytes, limit %d", ErrTooLarge, len(rd.Key), maxKey)
			case rd.Limit < 0:
				return fmt.Errorf("%w: negative limit %d", ErrInvalid, rd.Limit)
			}
		}
	}
	return nil
}

// reads runs the reads of the branch a transaction takes, in the
// committer, at the transaction's place in the commit order: they see
// what its compares saw, every write committed before it (the earlier
// requests of its group included) and none of its own writes.
func (c *committer) reads(reads []Read) []ReadResult {
	if len(reads) == 0 {
		return nil
	}
	out := make([]ReadResult, len(reads))
	for i := range reads {
		rd := &reads[i]
		if !rd.Range {
			if e := c.lookup(rd.Key); e != nil {
				out[i].Entries = []Entry{copyEntry(e)}
			}
			continue
		}
		out[i] = c.rangeRead(rd)
	}
	return out
}

// rangeRead reads a range: the visible map's entries, through a
// copy-on-write view as Scan takes, merged with the changes of the
// group's earlier requests (the overlay), which the map does not hold
// yet.
func (c *committer) rangeRead(rd *Read) ReadResult {
	in := func(k []byte) bool {
		return bytes.Compare(k, rd.Key) >= 0 && (rd.End == nil || bytes.Compare(k, rd.End) < 0)
	}
	var changed []string
	for k := range c.overlay {
		if in([]byte(k)) {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	// Clone writes to the tree's copy-on-write bookkeeping, which readers
	// share: under the write lock, as Scan takes it.
	c.mu.Lock()
	view, err := c.m.Clone()
	c.mu.Unlock()
	var res ReadResult
	if err != nil {
		c.readErr = cmp.Or(c.readErr, err)
		return res
	}
	defer view.Close()
	full := func() bool { return rd.Limit > 0 && len(res.Entries) == rd.Limit }
	add := func(e *record.Entry) bool {
		if full() {
			res.More = true
			return false
		}
		res.Entries = append(res.Entries, copyEntry(e))
		return true
	}
	// emit adds the overlay's changes of keys below k (all of them for a
	// nil k): a key the overlay holds is read from it, never from the map.
	emit := func(k []byte) bool {
		for len(changed) > 0 && (k == nil || changed[0] < string(k)) {
			e := c.overlay[changed[0]]
			changed = changed[1:]
			if e.Key != nil && !add(e) {
				return false
			}
		}
		return true
	}
	for e, err := range view.All(rd.Key, rd.End) {
		if err != nil {
			c.readErr = cmp.Or(c.readErr, err)
			return res
		}
		if !emit(e.Key) {
			return res
		}
		if len(changed) > 0 && changed[0] == string(e.Key) {
			continue // the overlay's version comes at the next emit
		}
		if !add(e) {
			return res
		}
	}
	emit(nil)
	return res
}

// copyEntry copies e and its bytes, which may live in the committer's
// scratch space or the map's memory, for the caller to keep.
func copyEntry(e *record.Entry) Entry {
	c := *e
	c.Key = bytes.Clone(e.Key)
	c.Value = bytes.Clone(e.Value)
	if c.Value == nil {
		c.Value = []byte{}
	}
	return c
}
