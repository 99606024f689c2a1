package record_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kvstore/kv/record"
)

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func cat(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}

func grant(rev record.Revision, ttl, deadline int64) record.Record {
	return record.Record{Revision: rev, Lease: record.LeaseChange{Action: record.LeaseGrant, ID: record.LeaseID(rev), TTL: ttl, Deadline: deadline}}
}

func keepAlive(rev record.Revision, id record.LeaseID, deadline int64) record.Record {
	return record.Record{Revision: rev, Lease: record.LeaseChange{Action: record.LeaseKeepAlive, ID: id, Deadline: deadline}}
}

func end(rev record.Revision, a record.LeaseAction, id record.LeaseID, keys ...string) record.Record {
	r := record.Record{Revision: rev, Lease: record.LeaseChange{Action: a, ID: id}}
	for _, k := range keys {
		r.Ops = append(r.Ops, opDel(k))
	}
	return r
}

func putOn(rev record.Revision, k, v string, id record.LeaseID) record.Record {
	return record.Record{Revision: rev, Ops: []record.Op{opPut(k, v).WithLease(id)}}
}

// TestLeaseLayout builds the lease kinds' encodings by hand from
// FORMAT.md's "Data record payload", field by field.
func TestLeaseLayout(t *testing.T) {
	tests := []struct {
		name string
		rec  record.Record
		want []byte
	}{
		{
			name: "put on a lease",
			rec:  putOn(0x0102, "ab", "xyz", 0x0a0b),
			want: cat([]byte{6}, le64(0x0102), le32(2), []byte("ab"), le32(3), []byte("xyz"), le64(0x0a0b)),
		},
		{
			name: "txn with a put on a lease",
			rec:  txn(9, opPut("a", "b").WithLease(3), opPut("c", "d")),
			want: cat([]byte{4}, le64(9), []byte{1}, le32(0), le32(2),
				[]byte{6}, le32(1), []byte("a"), le32(1), []byte("b"), le64(3),
				[]byte{1}, le32(1), []byte("c"), le32(1), []byte("d")),
		},
		{
			name: "grant",
			rec:  grant(7, 30e9, 1767225600e9),
			want: cat([]byte{7}, le64(7), []byte{1}, le64(7), le64(30e9), le64(1767225600e9), le32(0)),
		},
		{
			name: "keep-alive",
			rec:  keepAlive(8, 7, 1767225630e9),
			want: cat([]byte{7}, le64(8), []byte{2}, le64(7), le64(0), le64(1767225630e9), le32(0)),
		},
		{
			name: "revoke",
			rec:  end(9, record.LeaseRevoke, 7, "a", "bc"),
			want: cat([]byte{7}, le64(9), []byte{3}, le64(7), le64(0), le64(0), le32(2), le32(1), []byte("a"), le32(2), []byte("bc")),
		},
		{
			name: "expire",
			rec:  end(10, record.LeaseExpire, 7),
			want: cat([]byte{7}, le64(10), []byte{4}, le64(7), le64(0), le64(0), le32(0)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := record.Append(nil, &tt.rec)
			if !bytes.Equal(tt.want, got) {
				t.Errorf("Append (-want +got):\n%s", cmp.Diff(hex.Dump(tt.want), hex.Dump(got)))
			}
			if n := record.Size(&tt.rec); n != len(got) {
				t.Errorf("Size %d, encoding %d bytes", n, len(got))
			}
			dec, err := record.Decode(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rec, dec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode of the hand-built bytes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLeaseDecodeErrors: every field of the lease kinds outside its rule
// in FORMAT.md is ErrCorrupt.
func TestLeaseDecodeErrors(t *testing.T) {
	rev := func(r uint64) []byte { return le64(r) }
	lease := func(r uint64, action byte, id uint64, ttl, deadline int64, keys ...string) []byte {
		p := cat([]byte{7}, rev(r), []byte{action}, le64(id), le64(uint64(ttl)), le64(uint64(deadline)), le32(uint32(len(keys))))
		for _, k := range keys {
			p = cat(p, le32(uint32(len(k))), []byte(k))
		}
		return p
	}
	tests := []struct {
		name, reason string
		p            []byte
	}{
		{"put on lease 0", "lease 0", cat([]byte{6}, rev(1), le32(1), []byte("k"), le32(1), []byte("v"), le64(0))},
		{"put on a lease cut in its id", "need 8 bytes", cat([]byte{6}, rev(1), le32(1), []byte("k"), le32(1), []byte("v"), le64(3)[:7])},
		{"txn put on lease 0", "lease 0", cat([]byte{4}, rev(1), []byte{1}, le32(0), le32(1), []byte{6}, le32(1), []byte("k"), le32(0), le64(0))},
		{"action 0", "unknown lease action", lease(1, 0, 1, 0, 0)},
		{"action 5", "unknown lease action", lease(1, 5, 1, 0, 0)},
		{"lease id 0", "lease id 0", lease(1, 3, 0, 0, 0)},
		{"grant ttl 0", "grant with ttl 0", lease(4, 1, 4, 0, 9)},
		{"grant negative ttl", "grant with ttl -1", lease(4, 1, 4, -1, 9)},
		{"grant deadline 0", "deadline 0", lease(4, 1, 4, 5, 0)},
		{"grant negative deadline", "deadline -9", lease(4, 1, 4, 5, -9)},
		{"grant with keys", "1 keys", lease(4, 1, 4, 5, 9, "k")},
		{"grant id not its revision", "a lease's id is its grant's revision", lease(4, 1, 3, 5, 9)},
		{"keep-alive with a ttl", "keep-alive with ttl 5", lease(4, 2, 3, 5, 9)},
		{"keep-alive deadline 0", "deadline 0", lease(4, 2, 3, 0, 0)},
		{"keep-alive with keys", "1 keys", lease(4, 2, 3, 0, 9, "k")},
		{"revoke with a ttl", "revoke with ttl 5", lease(4, 3, 3, 5, 0)},
		{"expire with a deadline", "expire with ttl 0, deadline 9", lease(4, 4, 3, 0, 9)},
		{"keys out of order", `key "a" not after "b"`, lease(4, 3, 3, 0, 0, "b", "a")},
		{"key twice", `key "a" not after "a"`, lease(4, 4, 3, 0, 0, "a", "a")},
		{"key count past the end", "count 2 past the end", cat(lease(4, 3, 3, 0, 0)[:34], le32(2), le32(1), []byte("a"))},
		{"huge key count", "count 4294967295 past the end", cat(lease(4, 3, 3, 0, 0)[:34], le32(math.MaxUint32))},
		{"cut in the deadline", "need 8 bytes", lease(4, 1, 4, 5, 9)[:30]},
		{"trailing byte", "trailing", append(lease(4, 4, 3, 0, 0), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := record.Decode(tt.p)
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("Decode: %v (%+v), want ErrCorrupt", err, r)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Decode: %v, want it to say %q", err, tt.reason)
			}
		})
	}
}

// TestLeaseDecodeIntoReuse: a lease record decoded into a record that
// held a transaction keeps nothing of it, and the reverse.
func TestLeaseDecodeIntoReuse(t *testing.T) {
	recs := []record.Record{
		txn(1, opPut("a", "1").WithLease(9), opDel("b"), opAdd("c", 1)),
		end(2, record.LeaseRevoke, 9, "a", "x"),
		grant(3, 1, 2),
		putOn(4, "k", "v", 3),
		end(5, record.LeaseExpire, 3),
		txn(6, opPut("z", "")),
	}
	var reused record.Record
	for _, r := range recs {
		if err := record.DecodeInto(record.Append(nil, &r), &reused); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, reused, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("DecodeInto a used record (-want +got):\n%s", diff)
		}
	}
}

// leaseTable is a Leases in a form that prints well in a diff.
type leaseTable map[record.LeaseID]string

func tableOf(l *record.Leases) leaseTable {
	out := leaseTable{}
	for _, le := range l.All() {
		var keys []string
		for _, k := range le.Keys {
			keys = append(keys, string(k))
		}
		out[le.ID] = strings.Join(keys, ",")
	}
	return out
}

// TestLeasesApply walks the table through every rule of FORMAT.md's
// "Leases": binding, unbinding, an add keeping a binding, renewal, and
// the end of a lease; and each record that breaks a rule is refused with
// the table unchanged.
func TestLeasesApply(t *testing.T) {
	l := record.NewLeases()
	apply := func(r record.Record) {
		t.Helper()
		if err := l.Apply(&r); err != nil {
			t.Fatalf("Apply(%+v): %v", r, err)
		}
	}
	want := func(w leaseTable) {
		t.Helper()
		if diff := cmp.Diff(w, tableOf(l), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("leases (-want +got):\n%s", diff)
		}
	}
	apply(grant(1, 10, 100))
	apply(grant(2, 20, 50))
	apply(putOn(3, "a", "1", 1))
	apply(putOn(4, "b", "1", 1))
	apply(putOn(5, "c", "1", 2))
	want(leaseTable{1: "a,b", 2: "c"})
	if id, d, ok := l.Next(); !ok || id != 2 || d != 50 {
		t.Errorf("Next() = %d, %d, %v; want lease 2 at 50", id, d, ok)
	}
	apply(putOn(6, "a", "2", 2))                            // rebound
	apply(add(7, "b", 1))                                   // keeps b on 1
	apply(put(8, "c", "plain"))                             // unbound
	apply(txn(9, opDel("x"), opPut("d", "1").WithLease(1))) // a transaction binds too
	want(leaseTable{1: "b,d", 2: "a"})
	if got := l.Of([]byte("c")); got != 0 {
		t.Errorf("Of(c) = %d after a plain put, want 0", got)
	}
	apply(keepAlive(10, 2, 200))
	if id, d, _ := l.Next(); id != 1 || d != 100 {
		t.Errorf("Next() = %d, %d after lease 2's renewal; want lease 1 at 100", id, d)
	}
	if got := l.Due(150); !cmp.Equal(got, []record.LeaseID{1}) {
		t.Errorf("Due(150) = %v, want [1]", got)
	}
	if l.Hidden([]byte("b"), 99) || !l.Hidden([]byte("b"), 100) || l.Hidden([]byte("a"), 150) {
		t.Error("Hidden: b must be hidden from 100 on, a not at 150")
	}
	if got := l.DueKeys(100); !cmp.Equal(got, map[string]struct{}{"b": {}, "d": {}}) {
		t.Errorf("DueKeys(100) = %v, want b and d", got)
	}

	before := tableOf(l)
	clone := l.Clone()
	for _, bad := range []struct {
		name string
		rec  record.Record
	}{
		{"grant of a live id", grant(2, 1, 1)},
		{"keep-alive of an unknown lease", keepAlive(11, 7, 1)},
		{"revoke of an unknown lease", end(11, record.LeaseRevoke, 7)},
		{"expire leaving a key bound", end(11, record.LeaseExpire, 1, "b")},
		{"expire of a key not bound", end(11, record.LeaseExpire, 1, "b", "c", "d")},
		{"expire of another lease's key", end(11, record.LeaseExpire, 1, "a", "b")},
		{"put on an unknown lease", putOn(11, "e", "1", 7)},
		{"txn put on an unknown lease", txn(11, opPut("e", "1"), opPut("f", "1").WithLease(7))},
	} {
		if err := l.Apply(&bad.rec); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: Apply = %v, want ErrCorrupt", bad.name, err)
		}
		if diff := cmp.Diff(before, tableOf(l)); diff != "" {
			t.Errorf("%s: a refused record changed the table (-before +after):\n%s", bad.name, diff)
		}
	}

	apply(end(11, record.LeaseExpire, 1, "b", "d"))
	apply(del(12, "a"))
	want(leaseTable{2: ""})
	if l.Bound() != 0 || l.Len() != 1 {
		t.Errorf("Bound() = %d, Len() = %d; want 0 and 1", l.Bound(), l.Len())
	}
	apply(end(13, record.LeaseRevoke, 2))
	if _, _, ok := l.Next(); ok || l.Len() != 0 {
		t.Errorf("Next() found a lease in an empty table (Len %d)", l.Len())
	}
	// The clone taken before is untouched by all this.
	if diff := cmp.Diff(before, tableOf(clone)); diff != "" {
		t.Errorf("the clone changed with the table (-before +after):\n%s", diff)
	}
}

// TestLeasesRenewedOften: a lease renewed many times while another is at
// the top of the deadline order leaves no stale deadline behind: Next
// and Due see the live deadlines only.
func TestLeasesRenewedOften(t *testing.T) {
	l := record.NewLeases()
	for _, r := range []record.Record{grant(1, 1, 10), grant(2, 1, 1000)} {
		if err := l.Apply(&r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 {
		r := keepAlive(record.Revision(3+i), 2, int64(1000+i))
		if err := l.Apply(&r); err != nil {
			t.Fatal(err)
		}
	}
	r := end(2000, record.LeaseRevoke, 1)
	if err := l.Apply(&r); err != nil {
		t.Fatal(err)
	}
	if id, d, ok := l.Next(); !ok || id != 2 || d != 1999 {
		t.Errorf("Next() = %d, %d, %v; want lease 2 at 1999", id, d, ok)
	}
	if got := l.Due(1998); len(got) != 0 {
		t.Errorf("Due(1998) = %v: a stale deadline", got)
	}
}

// TestLeasesLoad: a snapshot's leases load, and a key bound twice or an
// id given twice is refused.
func TestLeasesLoad(t *testing.T) {
	l := record.NewLeases()
	if err := l.Load(&record.Lease{ID: 3, TTL: 1, Deadline: 5, Keys: [][]byte{[]byte("a"), []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []record.Lease{
		{ID: 0, TTL: 1, Deadline: 5},
		{ID: 3, TTL: 1, Deadline: 5},
		{ID: 4, TTL: 1, Deadline: 5, Keys: [][]byte{[]byte("b")}},
		{ID: 4, TTL: 1, Deadline: 5, Keys: [][]byte{[]byte("c"), []byte("c")}},
	} {
		if err := l.Load(&bad); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("Load(%+v) = %v, want ErrCorrupt", bad, err)
		}
	}
	if diff := cmp.Diff(leaseTable{3: "a,b"}, tableOf(l)); diff != "" {
		t.Errorf("refused loads changed the table (-want +got):\n%s", diff)
	}
	if got := l.Of([]byte("c")); got != 0 {
		t.Errorf("a refused load bound c to %d", got)
	}
}
