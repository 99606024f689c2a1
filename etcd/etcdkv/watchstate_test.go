package etcdkv

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/kv"
)

// put and del build etcd events: a put of key=value created at create
// (its version counted from there), with its previous value when prev
// is not empty; a delete with its previous value.
func put(key, value string, create, rev int64, prev string) *clientv3.Event {
	ev := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: create, ModRevision: rev, Version: rev - create + 1}}
	if prev != "" {
		ev.PrevKv = &mvccpb.KeyValue{Key: []byte(key), Value: []byte(prev), CreateRevision: create, ModRevision: rev - 1, Version: rev - create}
	}
	return ev
}

func del(key string, rev int64, prev string) *clientv3.Event {
	ev := &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
	if prev != "" {
		ev.PrevKv = &mvccpb.KeyValue{Key: []byte(key), Value: []byte(prev), CreateRevision: 1, ModRevision: rev - 1, Version: 1}
	}
	return ev
}

func evs(out []kv.Event) string {
	var b []string
	for _, e := range out {
		s := fmt.Sprintf("%v %s@%d", e.Type, e.Entry.Key, e.Revision())
		if e.Type == kv.EventPut {
			s += fmt.Sprintf("=%s c%d v%d", e.Entry.Value, e.Entry.CreateRev, e.Entry.Version)
		}
		if e.Prev != nil {
			s += fmt.Sprintf(" (was %s)", e.Prev.Value)
		}
		b = append(b, s)
	}
	return strings.Join(b, ", ")
}

// TestWatchHandle: what a watch makes of each response of etcd's, and
// where it goes on from.
func TestWatchHandle(t *testing.T) {
	type step struct {
		resp     clientv3.WatchResponse
		want     string // the events yielded
		err      string // the error, "" for none
		resume   bool
		wantNext int64
	}
	events := func(es ...*clientv3.Event) clientv3.WatchResponse {
		return clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 99}, Events: es}
	}
	for _, tc := range []struct {
		name  string
		from  int64
		prev  bool
		steps []step
	}{
		{"the revision before from is dropped; a transaction's events go together", 5, true, []step{
			{resp: clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 9}, Created: true}, wantNext: 5},
			{resp: events(put("z", "0", 4, 4, ""), put("a", "1", 5, 5, ""), put("a", "2", 5, 6, "1"), del("b", 6, "x")),
				want: "put a@5=1 c5 v1, put a@6=2 c5 v2 (was 1), delete b@6 (was x)", wantNext: 7},
			// A resumed watch sends revision 6 again: it was yielded.
			{resp: events(del("b", 6, "x"), put("c", "3", 7, 7, "")), want: "put c@7=3 c7 v1", wantNext: 8},
		}},
		{"without Prev, none is filled", 1, false, []step{
			{resp: events(put("a", "2", 1, 2, "1")), want: "put a@2=2 c1 v2", wantNext: 3},
		}},
		{"a previous value left out: again from its revision, then an error", 7, true, []step{
			{resp: events(put("a", "1", 7, 7, ""), put("b", "2", 1, 8, "1"), put("c", "3", 1, 8, "")), want: "put a@7=1 c7 v1", resume: true, wantNext: 8},
			{resp: events(put("b", "2", 1, 8, "1"), del("c", 8, "")), resume: true, wantNext: 8},
			{resp: events(del("c", 8, "")), resume: true, wantNext: 8},
			{resp: events(del("c", 8, "")), err: "without its previous value, 3 times", wantNext: 8},
		}},
		{"a previous value comes on the next try", 8, true, []step{
			{resp: events(put("b", "2", 1, 8, "")), resume: true, wantNext: 8},
			{resp: events(put("b", "2", 1, 8, "1")), want: "put b@8=2 c1 v8 (was 1)", wantNext: 9},
		}},
		{"compacted", 8, false, []step{
			{resp: clientv3.WatchResponse{CompactRevision: 9, Canceled: true}, err: "kv: watch from revision 8: compacted; the oldest revision held is 10", wantNext: 8},
		}},
		{"no leader: again", 8, false, []step{
			{resp: clientv3.WatchResponse{Canceled: true, CancelReason: "etcdserver: no leader"}, resume: true, wantNext: 8},
		}},
		{"another cancel: an error", 8, false, []step{
			{resp: clientv3.WatchResponse{Canceled: true, CancelReason: "etcdserver: permission denied"}, err: "etcdkv: watch: etcdserver: permission denied", wantNext: 8},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watchState{next: tc.from, prev: tc.prev}
			for i, st := range tc.steps {
				out, err, resume := w.handle(&st.resp)
				got, gotErr := evs(out), ""
				if err != nil {
					gotErr = err.Error()
				}
				if got != st.want || !strings.Contains(gotErr, st.err) || (st.err == "") != (err == nil) || resume != st.resume || w.next != st.wantNext {
					t.Errorf("step %d: %q, %v, resume %v, next %d; want %q, %q, resume %v, next %d",
						i, got, err, resume, w.next, st.want, st.err, st.resume, st.wantNext)
				}
				if strings.Contains(st.err, "compacted") {
					var ce *kv.CompactedError
					if !errors.As(err, &ce) || !errors.Is(err, kv.ErrCompacted) {
						t.Errorf("step %d: %v is not a *kv.CompactedError", i, err)
					}
				}
			}
		})
	}
}
