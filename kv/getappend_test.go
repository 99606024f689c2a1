package kv_test

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/kv"
)

// TestGetAppend checks GetAppend against Get over every kind of key a
// store with an image holds: keys only the image has, keys rewritten and
// deleted since the checkpoint, keys created since, and missing keys.
// An image entry must land in the caller's buffer (its Value inside the
// returned slice), an entry of the changes since the checkpoint must
// leave the buffer as it was, and a caller reusing the buffer must read
// image entries without an allocation.
func TestGetAppend(t *testing.T) {
	const n = 500
	s, err := kv.Open(t.TempDir(), &kv.Options{CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var txn kv.Txn
	for i := range n {
		txn.Then = append(txn.Then, kv.PutOp(imageKey(i), imageValue(i, 1)))
	}
	if _, err := s.Txn(txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	changed := map[int]bool{}
	for i := range 100 { // rewritten
		if _, err := s.Put(imageKey(i), imageValue(i, 2)); err != nil {
			t.Fatal(err)
		}
		changed[i] = true
	}
	for i := 100; i < 150; i++ { // deleted
		if _, err := s.Delete(imageKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := n; i < n+50; i++ { // created
		if _, err := s.Put(imageKey(i), imageValue(i, 1)); err != nil {
			t.Fatal(err)
		}
		changed[i] = true
	}

	buf := make([]byte, 0, 16)
	for i := range n + 60 { // the last 10 are missing
		key := imageKey(i)
		want, wantErr := s.Get(key)
		got, out, err := s.GetAppend(buf[:0], key)
		if (err == nil) != (wantErr == nil) || err != nil && !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("key %q: GetAppend's error %v, Get's %v", key, err, wantErr)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("key %q: GetAppend differs from Get (-Get +GetAppend):\n%s", key, d)
		}
		inOut := len(got.Value) > 0 && len(out) > 0 &&
			uintptr(unsafe.Pointer(unsafe.SliceData(got.Value))) >= uintptr(unsafe.Pointer(unsafe.SliceData(out))) &&
			uintptr(unsafe.Pointer(unsafe.SliceData(got.Value))) < uintptr(unsafe.Pointer(unsafe.SliceData(out)))+uintptr(len(out))
		switch {
		case err != nil || changed[i]:
			if len(out) != 0 {
				t.Errorf("key %q (not from the image): %d bytes appended to the buffer", key, len(out))
			}
		case !inOut:
			t.Errorf("key %q (from the image): its value is not in the returned buffer", key)
		}
		buf = out
	}

	// Reused, the buffer makes image reads free of allocations.
	var keys, values [][]byte
	for i := 200; i < n; i++ {
		keys, values = append(keys, imageKey(i)), append(values, imageValue(i, 1))
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		var e kv.Entry
		j := i % len(keys)
		e, buf, err = s.GetAppend(buf[:0], keys[j])
		if err != nil || !bytes.Equal(e.Value, values[j]) {
			t.Fatalf("key %q: %q, %v", keys[j], e.Value, err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("GetAppend into a reused buffer: %.1f allocations a call, want 0", allocs)
	}

	s.Close()
	if _, out, err := s.GetAppend(buf[:0], imageKey(300)); !errors.Is(err, kv.ErrClosed) || len(out) != 0 {
		t.Errorf("GetAppend after Close: %d bytes, %v; want none and ErrClosed", len(out), err)
	}
}
