package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// The workloads' checks, on the embedded store and on broken variants
// of it: each check must pass on the store and fail on the variant it
// is there to catch. No cluster is needed: the checks see only kvapi.KV
// and filelock.

const testDur = 200 * time.Millisecond

func openStore(t *testing.T) *kv.Store {
	t.Helper()
	s, err := kv.Open(t.TempDir(), &kv.Options{Sync: kv.Never})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// loseK3 acknowledges the puts to keys ending in /k3, after the first
// of each, without writing them: it commits a put of another key
// instead, so that the revision it returns is real and increasing.
type loseK3 struct {
	kvapi.KV
	seen *sync.Map
}

func (l loseK3) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	if len(t.Then) == 1 && strings.HasSuffix(string(t.Then[0].Key), "/k3") {
		if _, again := l.seen.LoadOrStore(string(t.Then[0].Key), true); again {
			t.Then = []kv.Op{kv.PutOp([]byte("elsewhere"), t.Then[0].Value)}
		}
	}
	return l.KV.Txn(ctx, t)
}

// staleRev returns revision 1 for every write after the first.
type staleRev struct {
	kvapi.KV
	n atomic.Int64
}

func (s *staleRev) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	res, err := s.KV.Txn(ctx, t)
	if s.n.Add(1) > 1 {
		res.Revision = 1
	}
	return res, err
}

func TestPutsCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(kvapi.KV) kvapi.KV
		want string // in the error; "" for none
	}{
		{"store", func(db kvapi.KV) kvapi.KV { return db }, ""},
		{"lost-put", func(db kvapi.KV) kvapi.KV { return loseK3{db, new(sync.Map)} }, "its last put wrote"},
		{"stale-revision", func(db kvapi.KV) kvapi.KV { return &staleRev{KV: db} }, "revision 1 after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.wrap(kvapi.Local(openStore(t)))
			r, err := puts(ctx(t), db, "p", 4, testDur)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "":
				if r.ops == 0 || len(r.lat) != r.ops || r.pct(0.5) > r.pct(0.99) {
					t.Fatalf("result: %d ops, %d latencies, p50 %v, p99 %v", r.ops, len(r.lat), r.pct(0.5), r.pct(0.99))
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("puts on %s: %v; want an error with %q", tc.name, err, tc.want)
			default:
				t.Logf("caught: %v", err)
			}
		})
	}
}

// blind is a lock backend that sees no key and checks no compare: every
// acquirer finds the lock free and takes it.
type blind struct{ lockstore.Backend }

func (blind) Get(context.Context, string) (lockstore.KeyValue, bool, error) {
	return lockstore.KeyValue{}, false, nil
}

func (b blind) Range(ctx context.Context, prefix string) ([]lockstore.KeyValue, int64, error) {
	_, rev, err := b.Backend.Range(ctx, prefix)
	return nil, rev, err
}

func (b blind) Txn(ctx context.Context, t lockstore.Txn) (lockstore.TxnResult, error) {
	t.If = nil
	return b.Backend.Txn(ctx, t)
}

func TestLockCyclesCheck(t *testing.T) {
	t.Run("store", func(t *testing.T) {
		s := openStore(t)
		r, err := lockCycles(ctx(t), func() (*filelock.Locker, error) { return filelock.New(s) }, "job", 4, testDur)
		if err != nil {
			t.Fatal(err)
		}
		if r.ops == 0 || len(r.lat) != r.ops {
			t.Fatalf("result: %d ops, %d latencies", r.ops, len(r.lat))
		}
	})
	t.Run("no-exclusion", func(t *testing.T) {
		s := openStore(t)
		b := blind{filelock.StoreBackend(s)}
		holders := filepath.Join(s.Dir(), filelock.HolderDirName)
		_, err := lockCycles(ctx(t), func() (*filelock.Locker, error) { return filelock.NewBackend(b, holders) }, "job", 16, time.Second)
		// Overlapping holders are seen at once, or by a token that went
		// back: one holder's token recorded after a later one's.
		if err == nil || !strings.Contains(err.Error(), "at once") && !strings.Contains(err.Error(), "token") {
			t.Fatalf("lock cycles on a lock without exclusion: %v; want two holders at once or a token that went back", err)
		}
		t.Logf("caught: %v", err)
	})
}

// TestNextToken: the token check refuses a token that is not larger
// than the one before.
func TestNextToken(t *testing.T) {
	var last atomic.Int64
	for _, tok := range []int64{5, 7} {
		if err := nextToken(&last, tok); err != nil {
			t.Fatal(err)
		}
	}
	for _, tok := range []int64{7, 6} {
		if err := nextToken(&last, tok); err == nil {
			t.Errorf("token %d after 7 passed", tok)
		}
		last.Store(7)
	}
}

// TestReport: the report has a row per figure with both backends'
// medians and ranges and etcd's cost, as a slower-is-larger ratio for
// throughputs and times alike.
func TestReport(t *testing.T) {
	works := []workload{{id: "put16", clients: 16}, {id: "lock1", clients: 1}}
	rounds := []round{
		{"put16.ops/embedded": 1000, "put16.ops/etcd": 100, "put16.p50/embedded": 0.001, "put16.p50/etcd": 0.004,
			"put16.p99/embedded": 0.01, "put16.p99/etcd": 0.02, "lock1.cycle/embedded": 0.002, "lock1.cycle/etcd": 0.006,
			"lock1.p99/embedded": 0.003, "lock1.p99/etcd": 0.003},
		{"put16.ops/embedded": 2000, "put16.ops/etcd": 400, "put16.p50/embedded": 0.002, "put16.p50/etcd": 0.004,
			"put16.p99/embedded": 0.01, "put16.p99/etcd": 0.03, "lock1.cycle/embedded": 0.002, "lock1.cycle/etcd": 0.008,
			"lock1.p99/embedded": 0.003, "lock1.p99/etcd": 0.006},
	}
	var b strings.Builder
	report(&b, header{cfg: config{dur: time.Second}, etcdV: "3.7.3", loads: []float64{1, 2, 3}, rounds: 2}, works, rounds)
	for _, want := range []string{
		"| put16.ops | durable puts, 16 clients: ops/s ↑ | 2.0k (1.0k–2.0k) | 400 (100–400) | 10.0× (5.0–10.0×) |",
		"| put16.p50 | durable puts, 16 clients: p50 ↓ | 2.00 ms (1.00 ms–2.00 ms) | 4.00 ms (4.00 ms–4.00 ms) | 4.0× (2.0–4.0×) |",
		"| lock1.cycle | lock acquire+release, 1 client: time per cycle ↓ | 2.00 ms (2.00 ms–2.00 ms) | 8.00 ms (6.00 ms–8.00 ms) | 4.0× (3.0–4.0×) |",
		"| lock1.p99 | lock acquire+release, 1 client: p99 ↓ | 3.00 ms (3.00 ms–3.00 ms) | 6.00 ms (3.00 ms–6.00 ms) | 2.0× (1.0–2.0×) |",
		"median 2.0 (1.0–3.0)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
