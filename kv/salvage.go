package kv

import (
	"bytes"
	"errors"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
)

// Salvage reads what survives in the data directory dir, whatever damage
// it holds, without changing anything: no lock, no write, no checkpoint.
// Its report holds every readable snapshot entry and log record, applied
// in revision order (Map), and what could not be read: damaged byte
// ranges, the keys a damaged snapshot range may have held, the revisions
// no readable record holds, missing segments. It is the read to run
// before a repair, which drops what the damage makes unrecoverable by
// the ordinary path; kv DIR dump --salvage prints it. Only opts.FS is
// used; opts may be nil.
func Salvage(dir string, opts *Options) (*recovery.SalvageReport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	return recovery.Salvage(o.fs(), dir)
}

// Restored says what RestoreSalvaged changed.
type Restored struct {
	// Puts and Deletes count the keys set to their salvaged value and
	// the keys deleted because the salvage lacks them.
	Puts, Deletes int
	// First and Last are the revisions of the first and the last
	// transaction committed (0 when nothing differed); they are equal
	// when everything fit in one.
	First, Last Revision
}

// Keys is the number of keys RestoreSalvaged changed.
func (r Restored) Keys() int { return r.Puts + r.Deletes }

// restoreBudget is the share of the log's largest record that one
// restoring transaction fills, so that its framing always fits too.
const restoreBudget = 2

// RestoreSalvaged makes every key of s hold what it holds in m, the map
// of a salvage (Salvage, taken before a repair): a put of each key whose
// value s lacks or holds differently, and a delete of each key of s that
// m lacks. It applies final values, never the log's records (an add is
// not idempotent; a put of its result is), so that running it again
// changes nothing. The operations commit in as few transactions as the
// log's record size allows, usually one; an error leaves those committed
// before it, which Restored counts.
func (s *Store) RestoreSalvaged(m *record.Map) (Restored, error) {
	var r Restored
	var ops []Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		res, err := s.Txn(Txn{Then: ops})
		if err != nil {
			return err
		}
		if r.First == 0 {
			r.First = res.Revision
		}
		r.Last = res.Revision
		for _, op := range ops {
			if op.Kind == record.KindDelete {
				r.Deletes++
			} else {
				r.Puts++
			}
		}
		ops, size = nil, 0
		return nil
	}
	add := func(op Op) error {
		n := len(op.Key) + len(op.Value) + 32
		if size+n > s.maxRecord/restoreBudget {
			if err := flush(); err != nil {
				return err
			}
		}
		ops, size = append(ops, op), size+n
		return nil
	}
	for e := range m.All(nil, nil) {
		cur, err := s.Get(e.Key)
		switch {
		case err == nil && bytes.Equal(cur.Value, e.Value):
			continue
		case err != nil && !errors.Is(err, ErrNotFound):
			return r, err
		}
		// The map's entries point into its arena: the op keeps copies.
		if err := add(PutOp(bytes.Clone(e.Key), bytes.Clone(e.Value))); err != nil {
			return r, err
		}
	}
	var gone [][]byte
	for e, err := range s.ScanErr(nil, nil) {
		if err != nil {
			return r, err
		}
		if _, ok := m.Get(e.Key); !ok {
			gone = append(gone, bytes.Clone(e.Key))
		}
	}
	for _, k := range gone {
		if err := add(DeleteOp(k)); err != nil {
			return r, err
		}
	}
	return r, flush()
}
