package recovery_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

func leaseRec(rev record.Revision, a record.LeaseAction, id record.LeaseID, ttl, deadline int64, keys ...string) record.Record {
	r := record.Record{Revision: rev, Lease: record.LeaseChange{Action: a, ID: id, TTL: ttl, Deadline: deadline}}
	for _, k := range keys {
		r.Ops = append(r.Ops, record.Op{Kind: record.KindDelete, Key: []byte(k)})
	}
	return r
}

func putLease(rev record.Revision, k, v string, id record.LeaseID) record.Record {
	return record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindPut, Key: []byte(k), Value: []byte(v), Lease: id}}}
}

// leaseLog is a log that grants two leases, binds keys to them, renews
// one, revokes nothing yet, and expires the other: what a store writes.
func leaseLog() []record.Record {
	return []record.Record{
		leaseRec(1, record.LeaseGrant, 1, 10e9, 1000e9),
		leaseRec(2, record.LeaseGrant, 2, 5e9, 500e9),
		putLease(3, "a", "1", 1),
		putLease(4, "b", "1", 2),
		putLease(5, "c", "1", 1),
		put(6, "plain", "x"),
		leaseRec(7, record.LeaseKeepAlive, 1, 0, 1500e9),
		leaseRec(8, record.LeaseExpire, 2, 0, 0, "b"),
		putLease(9, "d", "1", 1),
		{Revision: 10, Txn: true, Succeeded: true, Ops: []record.Op{{Kind: record.KindPut, Key: []byte("c"), Value: []byte("2")}}},
	}
}

// wantLeases is leaseLog's lease table after it all.
var wantLeases = []record.Lease{{ID: 1, TTL: 10e9, Deadline: 1500e9, Keys: [][]byte{[]byte("a"), []byte("d")}}}

func writeRecords(tb testing.TB, fsys vfs.FS, dir string, seg wal.SegmentNum, recs []record.Record) {
	tb.Helper()
	w, err := wal.Create(fsys, dir, seg, wal.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range recs {
		if _, err := w.Append(record.Append(nil, &recs[i])); err != nil {
			tb.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

var equateBytes = cmp.Comparer(bytes.Equal)

// TestLeasesRecovered: the log's leases come back with their deadlines as
// logged (a recovery moves none), into the snapshot its checkpoint
// writes, and from that snapshot into the next recovery; the keys the
// expire deleted are gone from the map.
func TestLeasesRecovered(t *testing.T) {
	fsys, dir := newDir(t)
	writeRecords(t, fsys, dir, 1, leaseLog())
	for _, ro := range []bool{true, false} {
		res, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantLeases, res.Leases.All(), equateBytes); diff != "" {
			t.Errorf("read-only %v: leases (-want +got):\n%s", ro, diff)
		}
		if diff := cmp.Diff(map[string]string{"a": "1", "c": "2", "d": "1", "plain": "x"}, dump(res.Map)); diff != "" {
			t.Errorf("read-only %v: map (-want +got):\n%s", ro, diff)
		}
		if !ro {
			if !res.Checkpointed {
				t.Fatal("the recovery did not checkpoint")
			}
			res.Writer.Close()
		}
	}
	var got []record.Lease
	var meta snapshot.Meta
	err := image.ReadAny(fsys, dir+"/"+snapshot.Name, func(m snapshot.Meta) error { meta = m; return nil },
		func(le *record.Lease) error { got = append(got, *le); return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantLeases, got, equateBytes); diff != "" {
		t.Errorf("the checkpoint's snapshot holds (-want +got):\n%s", diff)
	}
	if meta.Leases != 1 || meta.Revision != 10 {
		t.Errorf("snapshot meta %+v, want 1 lease at revision 10", meta)
	}
	// From the snapshot, and after a record more, the same.
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := leaseRec(11, record.LeaseRevoke, 1, 0, 0, "a", "d")
	if _, err := res.Writer.Append(record.Append(nil, &r)); err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	res, err = recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Leases.Len() != 0 || res.Leases.Bound() != 0 {
		t.Errorf("after the revoke: %v", res.Leases.All())
	}
	if diff := cmp.Diff(map[string]string{"c": "2", "plain": "x"}, dump(res.Map)); diff != "" {
		t.Errorf("after the revoke, map (-want +got):\n%s", diff)
	}
	// Check agrees with Recover.
	rep, err := recovery.Check(fsys, dir)
	if err != nil || !rep.Clean() || rep.Leases != 0 || rep.Keys != 2 {
		t.Errorf("Check: %v, %+v", err, rep)
	}
}

// TestLeaseRulesRefused: a log record that breaks a rule of FORMAT.md's
// "Leases" is corruption at its offset, which Recover refuses changing
// nothing and Check reports there.
func TestLeaseRulesRefused(t *testing.T) {
	base := []record.Record{leaseRec(1, record.LeaseGrant, 1, 10e9, 1000e9), putLease(2, "a", "1", 1)}
	tests := []struct {
		name   string
		bad    record.Record
		reason string
	}{
		{"grant under another id than its revision", leaseRec(3, record.LeaseGrant, 1, 1, 1), "a lease's id is its grant's revision"},
		{"keep-alive of a lease never granted", leaseRec(3, record.LeaseKeepAlive, 2, 0, 1), "not live"},
		{"revoke leaving a key bound", leaseRec(3, record.LeaseRevoke, 1, 0, 0), "deletes 0 keys; 1 are bound"},
		{"expire of a key not bound", leaseRec(3, record.LeaseExpire, 1, 0, 0, "b"), `deletes "b", which is not bound to it`},
		{"put on a lease never granted", putLease(3, "b", "1", 3), "not live"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeRecords(t, fsys, dir, 1, append(append([]record.Record(nil), base...), tt.bad, put(4, "z", "1")))
			spans := recordSpans(t, fsys, dir, 1)
			before := fsys.CrashClone()
			_, err := recovery.Recover(fsys, dir, recovery.Options{})
			var ce *wal.CorruptError
			if !errors.As(err, &ce) || !recovery.IsCorrupt(err) {
				t.Fatalf("Recover: %v, want corruption", err)
			}
			if ce.Offset != spans[2][0] || !strings.Contains(ce.Reason, tt.reason) {
				t.Errorf("corruption at %d (%s), want at %d saying %q", ce.Offset, ce.Reason, spans[2][0], tt.reason)
			}
			if diff := cmp.Diff(mustList(t, before, dir), mustList(t, fsys, dir)); diff != "" {
				t.Errorf("Recover changed the directory (-before +after):\n%s", diff)
			}
			rep, err := recovery.Check(fsys, dir)
			if err != nil || rep.Clean() || rep.Problems[0].Offset != spans[2][0] {
				t.Errorf("Check: %v, %+v", err, rep)
			}
		})
	}
}

// leaseDump is a table's leases in a form a diff shows well.
func leaseDump(l *record.Leases) []string {
	var out []string
	for _, le := range l.All() {
		var keys []string
		for _, k := range le.Keys {
			keys = append(keys, string(k))
		}
		out = append(out, fmt.Sprintf("lease %d ttl %d deadline %d keys %s", le.ID, le.TTL, le.Deadline, strings.Join(keys, ",")))
	}
	return out
}

// TestLeasesRecoveryCrashed: the recovery of a log with leases (which
// checkpoints them into a version 2 snapshot and deletes the log) is
// crashed after each of its file operations, as a process crash and as a
// power loss; recovering every state gives the same map and the same
// leases, deadlines included.
func TestLeasesRecoveryCrashed(t *testing.T) {
	fsys, dir := newDir(t)
	writeRecords(t, fsys, dir, 1, leaseLog())
	wantMap := map[string]string{"a": "1", "c": "2", "d": "1", "plain": "x"}
	want := leaseDump(mustRecoverLeases(t, fsys.Clone(), dir))
	for budget := 0; ; budget++ {
		base := fsys.Clone()
		res, err := recovery.Recover(&crashFS{FS: base, budget: budget}, dir, recovery.Options{})
		if err == nil {
			res.Writer.Close()
		} else if !errors.Is(err, errCrashed) {
			t.Fatalf("crash after op %d: %v", budget, err)
		}
		for name, st := range map[string]*vfs.MemFS{"process": base.Clone(), "power": base.CrashClone()} {
			res, err := recovery.Recover(st, dir, recovery.Options{})
			if err != nil {
				t.Fatalf("%s crash after op %d: %v", name, budget, err)
			}
			if diff := cmp.Diff(wantMap, dump(res.Map)); diff != "" {
				t.Errorf("%s crash after op %d: map (-want +got):\n%s", name, budget, diff)
			}
			if diff := cmp.Diff(want, leaseDump(res.Leases)); diff != "" {
				t.Errorf("%s crash after op %d: leases (-want +got):\n%s", name, budget, diff)
			}
			res.Writer.Close()
		}
		if err == nil {
			if budget < 5 {
				t.Fatalf("the recovery finished after %d operations: no checkpoint crashed", budget)
			}
			return
		}
	}
}

func mustRecoverLeases(tb testing.TB, fsys vfs.FS, dir string) *record.Leases {
	tb.Helper()
	res, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	return res.Leases
}
