package etcdlock_test

// The lock failures Jepsen reported for etcd (etcd-io/etcd#11457, "locks
// aren't really locks"), reproduced against etcd's own mutex
// (concurrency.Mutex) and shown fenced off by this library:
//
//   - A holder paused (SIGSTOP) after it checked that it holds the lock,
//     for longer than its lease: the lease expires, a new holder takes
//     the lock and writes, the paused one wakes up and writes. Under the
//     mutex the stale write lands over the new holder's; here it fails
//     with kv.ErrFenced and writes nothing.
//   - A release whose delete committed but whose answer was lost, retried
//     after the same session took the lock again (etcd-io/etcd#22082's
//     shape): the mutex's retry deletes the next holder's lock; here it
//     fails with ErrLockLost and deletes nothing.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvstore/kv/etcd/etcdlock"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/filelock"
)

// jepsenTTL is the holders' lease in these tests.
const jepsenTTL = 2 * time.Second

// holderProc is a running lockholder.
type holderProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startHolder(t *testing.T, c *cluster.Cluster, args ...string) *holderProc {
	t.Helper()
	args = append([]string{"-endpoints", strings.Join(c.Endpoints(), ","), "-ttl", jepsenTTL.String()}, args...)
	cmd := cluster.Command(holderBin, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &holderProc{t: t, cmd: cmd, in: in, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("lockholder's stderr: %s", stderr.String())
		}
	})
	return p
}

func (p *holderProc) read(timeout time.Duration) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("lockholder exited")
		}
		return l
	case <-time.After(timeout):
		p.t.Fatalf("lockholder silent for %v", timeout)
	}
	return ""
}

// TestPausedHolder is the Jepsen report's lock failure, on a real pause:
// the holder, having checked that it holds the lock, is stopped with
// SIGSTOP past its lease; another takes the lock and writes; the first
// is resumed and writes at once.
func TestPausedHolder(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	for _, mode := range []string{"mutex", "filelock"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := "data-" + mode
			a := startHolder(t, c, "-mode", mode, "-key", key, "-name", "job-"+mode)
			acq := a.read(30 * time.Second)
			tokenA, _ := strconv.ParseInt(strings.TrimPrefix(acq, "acquired "), 10, 64)
			if l := a.read(10 * time.Second); l != "checked" {
				t.Fatalf("holder a: %q", l)
			}
			a.cmd.Process.Signal(syscall.SIGSTOP)
			paused := time.Now()

			// b takes the lock once a's lease has expired, and writes.
			var tokenB int64
			switch mode {
			case "mutex":
				s, err := concurrency.NewSession(cl, concurrency.WithTTL(int(jepsenTTL.Seconds())))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				m := concurrency.NewMutex(s, "mutex/job-"+mode)
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				tokenB = m.Header().Revision
				if _, err := cl.Put(ctx, key, "b"); err != nil {
					t.Fatal(err)
				}
			case "filelock":
				l, err := etcdlock.NewLocker(cl, &etcdlock.Options{TTL: jepsenTTL})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				h, err := l.Acquire(ctx, "job-"+mode)
				if err != nil {
					t.Fatal(err)
				}
				tokenB = h.Token()
				if _, err := h.Put(ctx, key, []byte("b")); err != nil {
					t.Fatal(err)
				}
				defer h.Release()
			}
			t.Logf("a (token %d) paused; b took the lock %v later (token %d) and wrote", tokenA, time.Since(paused).Round(10*time.Millisecond), tokenB)

			a.cmd.Process.Signal(syscall.SIGCONT)
			fmt.Fprintln(a.in, "write a-stale")
			reply := a.read(30 * time.Second)
			resp, err := cl.Get(ctx, key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("reading %s: %v", key, err)
			}
			final := string(resp.Kvs[0].Value)
			t.Logf("a resumed and wrote: %q; %s = %q", reply, key, final)
			switch mode {
			case "mutex":
				// The reproduction: etcd's mutex lets the stale write land
				// over the new holder's.
				if !strings.HasPrefix(reply, "ok") || final != "a-stale" {
					t.Fatalf("the plain mutex: a's stale write %q, %s = %q; the report's failure did not reproduce", reply, key, final)
				}
			case "filelock":
				if !strings.HasPrefix(reply, "fenced") || final != "b" {
					t.Fatalf("a's stale write: %q, %s = %q; want fenced, and b's value kept", reply, key, final)
				}
				// The errors of a holder whose lease expired are those of
				// a dead holder taken over on the embedded store
				// (locktest's TakeoverOfDeadHolder): kv.ErrFenced and
				// filelock.ErrFenced for a write, ErrLockLost for a
				// release, which leaves b's lock in place.
				if !strings.HasPrefix(reply, "fenced (kv.ErrFenced, filelock.ErrFenced)") {
					t.Errorf("a's stale write: %q, want kv.ErrFenced and filelock.ErrFenced", reply)
				}
				fmt.Fprintln(a.in, "release")
				if r := a.read(30 * time.Second); !strings.HasPrefix(r, "lost") {
					t.Fatalf("a's release after its lease expired: %q, want ErrLockLost", r)
				}
				infos, _, err := etcdlock.NewBackend(cl, nil).Range(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				held := false
				for _, kv := range infos {
					held = held || kv.CreateRev == tokenB
				}
				if !held {
					t.Fatalf("a's release removed b's lock (token %d): %+v", tokenB, infos)
				}
			}
		})
	}
}

// lostAnswer is a gRPC interceptor that, once armed, lets one request of
// the method through to etcd and then reports DeadlineExceeded to the
// client, as a timeout after the commit would.
type lostAnswer struct {
	armed  atomic.Bool
	method string
}

func (l *lostAnswer) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && method == l.method && l.armed.CompareAndSwap(true, false) {
		return status.Error(codes.DeadlineExceeded, "lost answer (injected): the request committed")
	}
	return err
}

func faultyClient(t *testing.T, c *cluster.Cluster, la *lostAnswer) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(la.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestStaleUnlockRetry is etcd-io/etcd#22082's shape: an unlock whose
// delete committed but whose answer was lost, retried after the same
// session took the lock again under the same key.
func TestStaleUnlockRetry(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("mutex", func(t *testing.T) {
		la := &lostAnswer{method: "/etcdserverpb.KV/DeleteRange"}
		s, err := concurrency.NewSession(faultyClient(t, c, la))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m1 := concurrency.NewMutex(s, "mutex/job")
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		la.armed.Store(true)
		if err := m1.Unlock(ctx); err == nil {
			t.Fatal("the injected lost answer did not reach Unlock")
		}
		m2 := concurrency.NewMutex(s, "mutex/job")
		if err := m2.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if m2.Key() != m1.Key() {
			t.Fatalf("keys %q and %q: the shape needs the same key", m1.Key(), m2.Key())
		}
		if err := m1.Unlock(ctx); err != nil {
			t.Fatalf("the retried unlock: %v", err)
		}
		resp, err := cl.Get(ctx, m2.Key())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 0 {
			t.Fatalf("the retried unlock left m2's key: the report's failure did not reproduce")
		}
		// With m2's key gone, another session's mutex takes the lock at
		// once, while m2 still believes it holds it.
		s3, err := concurrency.NewSession(cl)
		if err != nil {
			t.Fatal(err)
		}
		defer s3.Close()
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		if err := concurrency.NewMutex(s3, "mutex/job").Lock(lctx); err != nil {
			t.Fatalf("a third mutex: %v", err)
		}
		t.Logf("the retried unlock deleted the next holder's key %q; a third session then took the lock beside it", m2.Key())
	})

	t.Run("filelock", func(t *testing.T) {
		la := &lostAnswer{method: "/etcdserverpb.KV/Txn"}
		l, err := etcdlock.NewLocker(faultyClient(t, c, la), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		h1, err := l.TryAcquire("job")
		if err != nil {
			t.Fatal(err)
		}
		la.armed.Store(true)
		if err := h1.ReleaseContext(ctx); err == nil {
			t.Fatal("the injected lost answer did not reach Release")
		}
		h2, err := l.TryAcquire("job")
		if err != nil {
			t.Fatal(err)
		}
		if h2.Key() != h1.Key() || h2.Token() <= h1.Token() {
			t.Fatalf("h2: key %q token %d; h1: %q %d", h2.Key(), h2.Token(), h1.Key(), h1.Token())
		}
		if err := h1.ReleaseContext(ctx); !errors.Is(err, filelock.ErrLockLost) {
			t.Fatalf("the retried release: %v, want ErrLockLost", err)
		}
		resp, err := cl.Get(ctx, h2.Key())
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != h2.Token() {
			t.Fatalf("h2's key after the retry: %v %v", resp, err)
		}
		if err := h2.Release(); err != nil {
			t.Fatal(err)
		}
		t.Logf("the retried release got ErrLockLost and left h2's key (token %d)", h2.Token())
	})
}

// TestPausesUnderContention runs lockholder processes in rounds of
// increments of one counter, each round a read and a write under the
// lock, while the test pauses them at random past their lease. Under
// this library every acknowledged increment is in the final count: a
// paused holder's stale write is fenced off. Under the plain mutex
// (run with -long) stale writes overwrite newer ones, and the count
// falls short; the test reports by how much.
func TestPausesUnderContention(t *testing.T) {
	holders, rounds, pauses := 3, 10, 2
	modes := []string{"filelock"}
	if *long {
		holders, rounds, pauses = 5, 60, 12
		modes = []string{"filelock", "mutex"}
	}
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			key := "counter-" + mode
			var ps []*holderProc
			for range holders {
				ps = append(ps, startHolder(t, c, "-mode", mode, "-key", key, "-name", "count-"+mode, "-loop", strconv.Itoa(rounds)))
			}
			var acked, fenced, failed atomic.Int64
			var failures sync.Map
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for l := range p.lines {
						switch {
						case strings.HasPrefix(l, "ok"):
							acked.Add(1)
						case l == "fenced":
							fenced.Add(1)
						default:
							failed.Add(1)
							failures.Store(l, true)
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			for i := 0; i < pauses; i++ {
				select {
				case <-done:
					i = pauses
					continue
				case <-time.After(time.Duration(200+rng.IntN(800)) * time.Millisecond):
				}
				p := ps[rng.IntN(len(ps))]
				p.cmd.Process.Signal(syscall.SIGSTOP)
				time.Sleep(jepsenTTL + time.Duration(rng.IntN(1000))*time.Millisecond)
				p.cmd.Process.Signal(syscall.SIGCONT)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				t.Fatal("the holders did not finish")
			}
			for _, p := range ps {
				p.cmd.Wait()
			}
			resp, err := cl.Get(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			var final int64
			if len(resp.Kvs) > 0 {
				final, _ = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
			}
			t.Logf("%s: %d increments acknowledged, %d fenced off, %d failed; the counter reads %d", mode, acked.Load(), fenced.Load(), failed.Load(), final)
			failures.Range(func(l, _ any) bool { t.Logf("a failed round: %s", l); return true })
			switch {
			case mode == "filelock" && final != acked.Load():
				t.Fatalf("the counter reads %d after %d acknowledged fenced increments: a stale write landed", final, acked.Load())
			case mode == "mutex" && final < acked.Load():
				t.Logf("the plain mutex lost %d acknowledged increments to paused holders' stale writes", acked.Load()-final)
			}
		})
	}
}
