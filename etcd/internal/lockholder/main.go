// Command lockholder holds a lock on an etcd cluster for this module's
// tests of the lock failures Jepsen reported (etcd-io/etcd#11457), so
// that the holder can be paused for real (SIGSTOP). It takes the lock,
// with a plain etcd mutex (concurrency.Mutex) or with package filelock
// through etcdlock, and prints "acquired TOKEN"; then it checks that it
// still holds the lock, prints "checked", and waits for "write VALUE" on
// stdin, which it writes to -key at once, without checking again: the
// pause a test puts between the check and the write is the stop-the-world
// pause of the report. It prints "ok REVISION", "fenced (ERRORS
// MATCHED) ERROR" or "error ERROR". On "release" it releases the lock and prints
// "released", "lost ERROR" (filelock.ErrLockLost: the lock was no longer
// its own) or "error ERROR".
//
// With -loop N it runs N rounds instead, and prints one line per round:
// take the lock, read the counter -key, write it plus one (fenced under
// filelock, plainly under the mutex), release. A round's line is "ok
// VALUE" for an acknowledged increment, "fenced", or "error ERROR". A
// test pauses the processes at random: every acknowledged increment
// must be in the final count, none overwritten by a paused holder.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/kvstore/kv/etcd/etcdlock"
	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
)

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated client URLs")
	mode := flag.String("mode", "filelock", "mutex (concurrency.Mutex) or filelock (etcdlock)")
	name := flag.String("name", "job", "lock name")
	key := flag.String("key", "data", "the key the lock guards")
	ttl := flag.Duration("ttl", 2*time.Second, "lease TTL")
	loop := flag.Int("loop", 0, "run this many increment rounds instead of the one-shot protocol")
	flag.Parse()

	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	if *loop > 0 {
		rounds(ctx, cli, *mode, *name, *key, *ttl, *loop)
		return
	}
	var check func() bool
	var write func(ctx context.Context, v string) (int64, error)
	var release func(ctx context.Context) error
	switch *mode {
	case "mutex":
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl.Seconds())))
		if err != nil {
			log.Fatal(err)
		}
		m := concurrency.NewMutex(s, "mutex/"+*name)
		if err := m.Lock(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println("acquired", m.Header().Revision)
		check = func() bool {
			select {
			case <-s.Done():
				return false
			default:
				return true
			}
		}
		write = func(ctx context.Context, v string) (int64, error) {
			resp, err := cli.Put(ctx, *key, v)
			if err != nil {
				return 0, err
			}
			return resp.Header.Revision, nil
		}
		release = m.Unlock
	case "filelock":
		l, err := etcdlock.NewLocker(cli, &etcdlock.Options{TTL: *ttl})
		if err != nil {
			log.Fatal(err)
		}
		h, err := l.Acquire(ctx, *name)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("acquired", h.Token())
		lost := h.Lost()
		check = func() bool {
			select {
			case <-lost:
				return false
			default:
				return true
			}
		}
		write = func(ctx context.Context, v string) (int64, error) { return h.Put(ctx, *key, []byte(v)) }
		release = h.ReleaseContext
	default:
		log.Fatalf("mode %q", *mode)
	}
	if !check() {
		log.Fatal("lost the lock before the check")
	}
	fmt.Println("checked")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "release" {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := release(rctx)
			cancel()
			switch {
			case errors.Is(err, filelock.ErrLockLost):
				fmt.Println("lost", err)
			case err != nil:
				fmt.Println("error", err)
			default:
				fmt.Println("released")
			}
			continue
		}
		v, ok := strings.CutPrefix(sc.Text(), "write ")
		if !ok {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rev, err := write(wctx, v)
		cancel()
		switch {
		case errors.Is(err, kv.ErrFenced) && errors.Is(err, filelock.ErrFenced):
			fmt.Println("fenced (kv.ErrFenced, filelock.ErrFenced)", err)
		case errors.Is(err, kv.ErrFenced):
			fmt.Println("fenced (kv.ErrFenced)", err)
		case err != nil:
			fmt.Println("error", err)
		default:
			fmt.Println("ok", rev)
		}
	}
}

// rounds runs the -loop protocol.
func rounds(ctx context.Context, cli *clientv3.Client, mode, name, key string, ttl time.Duration, n int) {
	var locker *filelock.Locker
	var session *concurrency.Session
	if mode == "filelock" {
		var err error
		if locker, err = etcdlock.NewLocker(cli, &etcdlock.Options{TTL: ttl}); err != nil {
			log.Fatal(err)
		}
		defer locker.Close()
	}
	for range n {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var write func(v string) error
		var release func()
		switch mode {
		case "mutex":
			if session == nil || isDone(session.Done()) {
				s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl.Seconds())))
				if err != nil {
					fmt.Println("error", err)
					cancel()
					continue
				}
				session = s
			}
			m := concurrency.NewMutex(session, "mutex/"+name)
			if err := m.Lock(rctx); err != nil {
				fmt.Println("error", err)
				cancel()
				continue
			}
			write = func(v string) error { _, err := cli.Put(rctx, key, v); return err }
			release = func() { m.Unlock(rctx) }
		default:
			h, err := locker.Acquire(rctx, name)
			if err != nil {
				fmt.Println("error", err)
				cancel()
				continue
			}
			write = func(v string) error { _, err := h.Put(rctx, key, []byte(v)); return err }
			release = func() { h.ReleaseContext(rctx) }
		}
		resp, err := cli.Get(rctx, key)
		var cur int
		if err == nil && len(resp.Kvs) > 0 {
			fmt.Sscan(string(resp.Kvs[0].Value), &cur)
		}
		if err == nil {
			// The window a pause lands in, between the read and the write.
			time.Sleep(100 * time.Millisecond)
			err = write(fmt.Sprint(cur + 1))
		}
		switch {
		case errors.Is(err, kv.ErrFenced):
			fmt.Println("fenced")
		case err != nil:
			fmt.Println("error", err)
		default:
			fmt.Println("ok", cur+1)
		}
		release()
		cancel()
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
