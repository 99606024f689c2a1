package kv_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// readKeys is what a read gave, as key=value strings.
func readKeys(r kv.ReadResult) []string {
	var out []string
	for _, e := range r.Entries {
		out = append(out, string(e.Key)+"="+string(e.Value))
	}
	return out
}

func openMem(t *testing.T) *kv.Store {
	t.Helper()
	s, err := kv.Open("data", &kv.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTxnReads: the branch taken reads, with its compares, what was
// committed before the transaction and none of its own writes; a
// transaction of reads alone commits nothing.
func TestTxnReads(t *testing.T) {
	s := openMem(t)
	for _, kvp := range [][2]string{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}} {
		if _, err := s.Put([]byte(kvp[0]), []byte(kvp[1])); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		txn       kv.Txn
		succeeded bool
		reads     [][]string
		more      []bool
	}{
		{"then reads, its own write unseen", kv.Txn{
			If:       []kv.Compare{kv.CompareValue([]byte("a"), kv.Equal, []byte("1"))},
			Then:     []kv.Op{kv.PutOp([]byte("a"), []byte("10"))},
			ThenRead: []kv.Read{kv.GetRead([]byte("a")), kv.GetRead([]byte("nokey"))},
			ElseRead: []kv.Read{kv.GetRead([]byte("b"))},
		}, true, [][]string{{"a=1"}, nil}, []bool{false, false}},
		{"else reads: the compare failed, read the current value", kv.Txn{
			If:       []kv.Compare{kv.CompareValue([]byte("a"), kv.Equal, []byte("1"))},
			Then:     []kv.Op{kv.PutOp([]byte("a"), []byte("11"))},
			ThenRead: []kv.Read{kv.GetRead([]byte("b"))},
			ElseRead: []kv.Read{kv.GetRead([]byte("a"))},
		}, false, [][]string{{"a=10"}}, []bool{false}},
		{"ranges, with and without a limit", kv.Txn{
			ThenRead: []kv.Read{kv.RangeRead([]byte("b"), []byte("d"), 0), kv.RangeRead(nil, nil, 2), kv.PrefixRead([]byte("c"), 0)},
		}, true, [][]string{{"b=2", "c=3"}, {"a=10", "b=2"}, {"c=3"}}, []bool{false, true, false}},
		{"reads alone", kv.Txn{ThenRead: []kv.Read{kv.RangeRead([]byte("d"), nil, 1)}}, true, [][]string{{"d=4"}}, []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev := s.Revision()
			res, err := s.Txn(tc.txn)
			if err != nil {
				t.Fatal(err)
			}
			if res.Succeeded != tc.succeeded {
				t.Errorf("succeeded %v, want %v", res.Succeeded, tc.succeeded)
			}
			var got [][]string
			var more []bool
			for _, r := range res.Reads {
				got = append(got, readKeys(r))
				more = append(more, r.More)
			}
			if d := cmp.Diff(tc.reads, got); d != "" {
				t.Errorf("reads (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.more, more); d != "" {
				t.Errorf("More (-want +got):\n%s", d)
			}
			writes := len(tc.txn.Then) > 0 && tc.succeeded || len(tc.txn.Else) > 0 && !tc.succeeded
			if res.Committed != writes || (!writes && res.Revision != rev) {
				t.Errorf("committed %v at %d (store at %d before), want committed %v", res.Committed, res.Revision, rev, writes)
			}
		})
	}
	for _, bad := range []kv.Txn{
		{ThenRead: []kv.Read{kv.GetRead(nil)}},
		{ElseRead: []kv.Read{kv.RangeRead(nil, nil, -1)}},
	} {
		if _, err := s.Txn(bad); !errors.Is(err, kv.ErrInvalid) {
			t.Errorf("Txn(%+v): %v, want ErrInvalid", bad, err)
		}
	}
}

// TestTxnReadsInGroups: writes and ranged reads submitted one after
// another by one goroutine, so that they share group commits: every read
// gives the model's map after the writes submitted before it, whether
// those wait in the group's overlay or are in the map already.
func TestTxnReadsInGroups(t *testing.T) {
	s := openMem(t)
	rng := rand.New(rand.NewPCG(7, 17))
	model := map[string]string{}
	key := func() []byte { return fmt.Appendf(nil, "k%02d", rng.IntN(40)) }
	type check struct {
		p    *kv.Pending
		want [][]string
		more []bool
	}
	var checks []check
	for range 3000 {
		switch n := rng.IntN(10); {
		case n < 5:
			k, v := key(), fmt.Sprint(rng.IntN(1000))
			s.Submit(kv.PutOp(k, []byte(v)))
			model[string(k)] = v
		case n < 8:
			k := key()
			s.Submit(kv.DeleteOp(k))
			delete(model, string(k))
		default:
			lo, hi := key(), key()
			if string(lo) > string(hi) {
				lo, hi = hi, lo
			}
			limit := rng.IntN(4) * 5
			var keys []string
			for k := range model {
				if k >= string(lo) && k < string(hi) {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			more := limit > 0 && len(keys) > limit
			if more {
				keys = keys[:limit]
			}
			var want []string
			for _, k := range keys {
				want = append(want, k+"="+model[k])
			}
			g := key()
			var wantGet []string
			if v, ok := model[string(g)]; ok {
				wantGet = []string{string(g) + "=" + v}
			}
			p := s.SubmitTxn(kv.Txn{ThenRead: []kv.Read{kv.RangeRead(lo, hi, limit), kv.GetRead(g)}})
			checks = append(checks, check{p, [][]string{want, wantGet}, []bool{more, false}})
		}
	}
	for i, c := range checks {
		if _, _, err := c.p.Wait(); err != nil {
			t.Fatal(err)
		}
		res := c.p.Result()
		var got [][]string
		var more []bool
		for _, r := range res.Reads {
			got = append(got, readKeys(r))
			more = append(more, r.More)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Fatalf("read %d (-model +store):\n%s", i, d)
		}
		if d := cmp.Diff(c.more, more); d != "" {
			t.Fatalf("read %d: More (-model +store):\n%s", i, d)
		}
	}
	if st := s.Stats(); st.AvgGroupSize < 2 {
		t.Logf("groups averaged %.1f requests: the overlay was little used", st.AvgGroupSize)
	}
}

// TestNotFoundNamesTheKey: Get and Delete of a missing key fail with a
// *NotFoundError naming the key (quoted, so that an empty key shows),
// which matches ErrNotFound.
func TestNotFoundNamesTheKey(t *testing.T) {
	s := openMem(t)
	for _, key := range []string{"missing", "", "a key"} {
		_, err := s.Get([]byte(key))
		var nf *kv.NotFoundError
		if !errors.Is(err, kv.ErrNotFound) || !errors.As(err, &nf) || string(nf.Key) != key {
			t.Errorf("Get(%q): %v, want a *NotFoundError for it", key, err)
		}
		if want := fmt.Sprintf("kv: key %q not found", key); err == nil || err.Error() != want {
			t.Errorf("Get(%q): %v, want %q", key, err, want)
		}
	}
	_, err := s.Delete([]byte("gone"))
	var nf *kv.NotFoundError
	if !errors.Is(err, kv.ErrNotFound) || !errors.As(err, &nf) || string(nf.Key) != "gone" {
		t.Errorf("Delete of a missing key: %v, want a *NotFoundError for it", err)
	}
}
