package kv_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestFenceInGroup: a fenced write queued in the same group commit as a
// delete of its lock key and the key's re-creation (a new holder's
// create-if-absent) is evaluated after them, in commit order: with the
// old holder's token it gets ErrFenced and commits nothing, whatever
// kind of write it is; with the new holder's token it commits. The
// group's first sync is held so that the three writes queue behind it
// and form one group.
func TestFenceInGroup(t *testing.T) {
	lock, target := []byte("L"), []byte("x")
	tests := []struct {
		name string
		// write is the fenced write; old is L's create revision before
		// the group, oldMod its mod revision, next the create revision
		// the group gives it.
		write func(s *kv.Store, old, oldMod, next kv.Revision) (kv.Revision, error)
		// commits: the write holds the new holder's token.
		commits bool
	}{
		{name: "put, old token", write: func(s *kv.Store, old, _, _ kv.Revision) (kv.Revision, error) {
			return s.Fenced(kv.Fence{Key: lock, Token: old}).Put(target, []byte("stale"))
		}},
		{name: "add, old token", write: func(s *kv.Store, old, _, _ kv.Revision) (kv.Revision, error) {
			_, rev, err := s.Fenced(kv.Fence{Key: lock, Token: old}).Add([]byte("n"), 1)
			return rev, err
		}},
		{name: "delete, old token", write: func(s *kv.Store, old, _, _ kv.Revision) (kv.Revision, error) {
			return s.Fenced(kv.Fence{Key: lock, Token: old}).Delete(target)
		}},
		{name: "txn with else, old token", write: func(s *kv.Store, old, _, _ kv.Revision) (kv.Revision, error) {
			res, err := s.Fenced(kv.Fence{Key: lock, Token: old}).Txn(kv.Txn{
				If:   []kv.Compare{kv.CompareValue(target, kv.Equal, []byte("nope"))},
				Then: []kv.Op{kv.PutOp(target, []byte("then"))},
				Else: []kv.Op{kv.PutOp(target, []byte("else"))},
			})
			if res.Committed {
				return res.Revision, err
			}
			return 0, err
		}},
		{name: "put, old mod revision", write: func(s *kv.Store, _, oldMod, _ kv.Revision) (kv.Revision, error) {
			return s.Fenced(kv.Fence{Key: lock, Token: oldMod, By: kv.FenceModRev}).Put(target, []byte("stale"))
		}},
		{name: "put, new token", commits: true, write: func(s *kv.Store, _, _, next kv.Revision) (kv.Revision, error) {
			return s.Fenced(kv.Fence{Key: lock, Token: next}).Put(target, []byte("new holder"))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			h := &hookFS{FS: mem}
			s, _ := memStore(t, &kv.Options{FS: h})
			old, err := s.Put(lock, []byte("a"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Put(target, []byte("1")); err != nil {
				t.Fatal(err)
			}
			oldMod, err := s.Put(lock, []byte("a, renewed")) // the create revision stays
			if err != nil {
				t.Fatal(err)
			}
			r0 := s.Revision()

			var mu sync.Mutex
			syncs := 0
			entered, release := make(chan struct{}), make(chan struct{})
			h.setSync(func(name string) error {
				if !strings.Contains(name, "log.") {
					return nil
				}
				mu.Lock()
				syncs++
				first := syncs == 1
				mu.Unlock()
				if first {
					close(entered)
					<-release
				}
				return nil
			})
			x := s.Submit(kv.PutOp([]byte("held"), []byte("X"))) // r0+1, its sync held
			<-entered

			type result struct {
				rev kv.Revision
				res kv.TxnResult
				err error
			}
			next := r0 + 3 // X, the delete, the create
			steps := []func() result{
				func() result { rev, err := s.Delete(lock); return result{rev: rev, err: err} },
				func() result {
					res, err := s.Txn(kv.Txn{If: []kv.Compare{kv.Absent(lock)}, Then: []kv.Op{kv.PutOp(lock, []byte("b"))}})
					return result{res: res, err: err}
				},
				func() result { rev, err := tc.write(s, old, oldMod, next); return result{rev: rev, err: err} },
			}
			outs := make([]chan result, len(steps))
			for i, step := range steps {
				outs[i] = make(chan result, 1)
				go func() { outs[i] <- step() }()
				// Queue them in this order.
				deadline := time.Now().Add(10 * time.Second)
				for kv.Queued(s) < i+1 {
					if time.Now().After(deadline) {
						t.Fatalf("step %d never queued", i)
					}
					time.Sleep(50 * time.Microsecond)
				}
			}
			close(release)
			if _, _, err := x.Wait(); err != nil {
				t.Fatal(err)
			}
			del, create, fenced := <-outs[0], <-outs[1], <-outs[2]
			if del.err != nil || del.rev != r0+2 {
				t.Fatalf("delete of L: revision %d, %v; want %d", del.rev, del.err, r0+2)
			}
			if want := (kv.TxnResult{Succeeded: true, Committed: true, Revision: next}); create.err != nil || !reflect.DeepEqual(create.res, want) {
				t.Fatalf("create-if-absent of L: %+v, %v; want %+v", create.res, create.err, want)
			}
			mu.Lock()
			if syncs != 2 {
				t.Errorf("%d log syncs, want 2: the delete, the create and the fenced write share one group", syncs)
			}
			mu.Unlock()

			want := map[string]string{"L": "b", "x": "1", "held": "X"}
			wantRev := next
			if tc.commits {
				if fenced.err != nil || fenced.rev != next+1 {
					t.Fatalf("fenced write with the new token: revision %d, %v; want %d", fenced.rev, fenced.err, next+1)
				}
				want["x"], wantRev = "new holder", next+1
			} else if !errors.Is(fenced.err, kv.ErrFenced) || fenced.rev != 0 {
				t.Fatalf("fenced write with the old token: revision %d, %v; want ErrFenced and nothing committed", fenced.rev, fenced.err)
			}
			if s.Revision() != wantRev {
				t.Errorf("revision %d, want %d", s.Revision(), wantRev)
			}
			if diff := cmp.Diff(want, dumpStore(s)); diff != "" {
				t.Errorf("map (-want +got):\n%s", diff)
			}
			// And so after a power loss: nothing else was logged.
			r := reopen(t, mem.CrashClone(), kv.Options{})
			if diff := cmp.Diff(want, dumpStore(r)); diff != "" {
				t.Errorf("map after a power loss (-want +got):\n%s", diff)
			}
			if e, err := r.Get(lock); err != nil || e.CreateRev != next {
				t.Errorf("L after a power loss: created at %d, %v; want %d", e.CreateRev, err, next)
			}
			if r.Revision() != wantRev {
				t.Errorf("revision %d after a power loss, want %d", r.Revision(), wantRev)
			}
		})
	}
}
