package filelock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
)

// A lock whose token fences writes: once the lock has passed on, the old
// token can write nothing.
func Example() {
	tmp, err := os.MkdirTemp("", "filelock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx := context.Background()

	l, err := filelock.Open(filepath.Join(tmp, "data")) // a kv store; created if missing
	if err != nil {
		log.Fatal(err)
	}
	h, err := l.Acquire(ctx, "nightly")
	if err != nil {
		log.Fatal(err)
	}
	// A write that commits only while h holds the lock.
	if _, err := h.Put(ctx, "nightly/state", []byte("running")); err != nil {
		log.Fatal(err)
	}
	// Another acquirer fails fast, naming the holder.
	_, err = l.TryAcquire("nightly")
	fmt.Println("locked:", errors.Is(err, filelock.ErrLocked))

	old := h.Token()
	if err := h.Release(); err != nil {
		log.Fatal(err)
	}
	h2, err := l.TryAcquire("nightly")
	if err != nil {
		log.Fatal(err)
	}
	defer h2.Release()
	fmt.Println("larger token:", h2.Token() > old)

	// A late write under the old token is refused, atomically.
	_, err = l.Fenced("nightly", old).Put(ctx, "nightly/state", []byte("late"))
	fmt.Println("fenced:", errors.Is(err, kv.ErrFenced))
	// Output:
	// locked: true
	// larger token: true
	// fenced: true
}

// A process that keeps the store open uses New, and can fence its own
// writes through the store's API.
func ExampleNew() {
	tmp, err := os.MkdirTemp("", "filelock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	s, err := kv.Open(tmp, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	l, err := filelock.New(s, filelock.WithSlots(2))
	if err != nil {
		log.Fatal(err)
	}
	a, _ := l.TryAcquire("pool")
	b, _ := l.TryAcquire("pool")
	_, err = l.TryAcquire("pool")
	fmt.Println("slots", a.Slot(), b.Slot(), "third locked:", errors.Is(err, filelock.ErrLocked))

	f, err := filelock.StoreFence(s, "pool", b.Token())
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.Fenced(f).Put([]byte("pool/b"), []byte("1"))
	fmt.Println("fenced put:", err)
	a.Release()
	b.Release()
	// Output:
	// slots 0 1 third locked: true
	// fenced put: <nil>
}
