package kv_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
)

// TestRestoreSalvaged: the store ends holding exactly the salvaged map
// (puts of what differs or is missing, deletes of what the salvage
// lacks), an integer as its final value, never added again, and a
// second run changes nothing.
func TestRestoreSalvaged(t *testing.T) {
	s, _ := memStore(t, nil)
	for _, p := range [][2]string{{"same", "1"}, {"differs", "old"}, {"extra", "x"}} {
		if _, err := s.Put([]byte(p[0]), []byte(p[1])); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Add([]byte("c"), 5); err != nil {
		t.Fatal(err)
	}
	m := record.NewMap()
	ops := []record.Op{
		{Kind: record.KindPut, Key: []byte("same"), Value: []byte("1")},
		{Kind: record.KindPut, Key: []byte("differs"), Value: []byte("new")},
		{Kind: record.KindPut, Key: []byte("missing"), Value: []byte("m")},
		{Kind: record.KindAdd, Key: []byte("c"), Delta: 7},
	}
	if err := m.Apply(&record.Record{Revision: 1, Ops: ops}); err != nil {
		t.Fatal(err)
	}
	r, err := s.RestoreSalvaged(m)
	if err != nil {
		t.Fatal(err)
	}
	// same is left alone; differs, missing and c are put; extra deleted.
	if r.Puts != 3 || r.Deletes != 1 || r.First == 0 || r.First != r.Last {
		t.Errorf("restored %+v, want 3 puts and 1 delete in one transaction", r)
	}
	want := map[string]string{"same": "1", "differs": "new", "missing": "m", "c": "7"}
	if d := cmp.Diff(want, dumpStore(s)); d != "" {
		t.Errorf("map after the restore (-want +got):\n%s", d)
	}
	rev := s.Revision()
	if r, err := s.RestoreSalvaged(m); err != nil || r.Puts+r.Deletes != 0 || s.Revision() != rev {
		t.Errorf("a second run: %+v, %v, revision %d → %d; want nothing changed", r, err, rev, s.Revision())
	}
}
