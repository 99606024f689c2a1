package opmodel

import (
	"fmt"
	"strings"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
)

// History is a map and every map it was: the one after each record
// committed to it, worked out without the store, for a checker to hold a
// recovered map against. A record is a list of operations applied
// together at the next revision, as the store commits a transaction, with
// the map's rules (record.Map): a delete of a missing key changes
// nothing, an add to a missing key starts from 0.
type History struct {
	m     *record.Map
	dumps []string // dumps[k] is the map after the first k records
}

// NewHistory starts a history from base at revision rev, its keys as if
// each were created at revision 1 and never changed since.
func NewHistory(base map[string]string, rev kv.Revision) *History {
	m := record.NewMap()
	for k, v := range base {
		m.Load(&record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: 1, ModRev: 1, Version: 1})
	}
	m.SetRevision(rev)
	h := &History{m: m}
	h.dumps = append(h.dumps, h.dump())
	return h
}

// Replay is the history of ops committed one record each, in order, from
// the empty map at revision 0, as kv load commits them. Every operation
// must commit: an add to a value that is not a decimal integer, or past
// int64, is an error that names it.
func Replay(ops []kv.Op) (*History, error) {
	h := NewHistory(nil, 0)
	for i, op := range ops {
		if err := h.Commit([]kv.Op{op}); err != nil {
			return nil, fmt.Errorf("opmodel: operation %d commits nothing: %w", i+1, err)
		}
	}
	return h, nil
}

// Commit applies ops as one record at the next revision. When one of them
// fails (an add to a value that is not a decimal integer, or past int64),
// the record commits nothing and Commit returns the error.
func (h *History) Commit(ops []kv.Op) error {
	r := &record.Record{Revision: h.m.Revision() + 1, Txn: true, Ops: ops}
	if err := h.m.Apply(r); err != nil {
		return err
	}
	h.dumps = append(h.dumps, h.dump())
	return nil
}

// Lookup returns key's entry now, with its revisions and version: what a
// fence or a compare is judged against.
func (h *History) Lookup(key []byte) (record.Entry, bool) { return h.m.Lookup(key) }

// Revision is the revision of the last record committed, or the base's.
func (h *History) Revision() kv.Revision { return h.m.Revision() }

// Records is the number of records committed since the base.
func (h *History) Records() int { return len(h.dumps) - 1 }

// Dump is the map after the first k records, as kv dump prints it: the
// base's for k = 0.
func (h *History) Dump(k int) string { return h.dumps[k] }

// Map is the map after the first k records.
func (h *History) Map(k int) map[string]string {
	m, err := ParseDump(h.dumps[k])
	if err != nil {
		panic(err) // written by DumpLine
	}
	return m
}

func (h *History) dump() string {
	var b strings.Builder
	for e := range h.m.All(nil, nil) {
		b.WriteString(DumpLine(e.Key, e.Value))
	}
	return b.String()
}
