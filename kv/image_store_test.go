package kv_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvstore/kv/kv"
)

// imageValue is the value key i holds at its version v: a reader that
// holds an entry can tell, from its key and version alone, whether its
// value is still the bytes it was read with.
func imageValue(i int, v int64) []byte {
	return []byte(fmt.Sprintf("value of %06d at version %d %s", i, v, bytes.Repeat([]byte{'x'}, i%50)))
}

func imageKey(i int) []byte { return []byte(fmt.Sprintf("k%06d", i)) }

// TestSwapUnderReaders checks that no entry a reader holds changes while
// checkpoints write images and swap them in under the store, each
// closing (and, once nothing reads it, unmapping) the image before: Gets,
// Scans and ScanErrs on several goroutines keep every entry they read,
// and at the end each entry still holds the value of its key at its
// version. It runs on the real file system, so the images are mapped.
// Were an entry a slice of a mapping, the unmap would turn its bytes
// into a fault, or a reuse of the address into other bytes.
func TestSwapUnderReaders(t *testing.T) {
	const n = 3000
	dir := t.TempDir()
	s, err := kv.Open(dir, &kv.Options{CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	version := make([]int64, n)
	var txn kv.Txn
	for i := range n {
		version[i] = 1
		txn.Then = append(txn.Then, kv.PutOp(imageKey(i), imageValue(i, 1)))
	}
	if _, err := s.Txn(txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	held := make([][]kv.Entry, 4)
	var reads atomic.Int64
	for r := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for !stop.Load() {
				if rng.IntN(50) == 0 {
					k := 0
					for e, err := range s.ScanErr(imageKey(rng.IntN(n)), nil) {
						if err != nil {
							t.Error(err)
							return
						}
						if k++; k%7 == 0 {
							held[r] = append(held[r], e)
						}
						if k == 400 {
							break
						}
					}
					continue
				}
				e, err := s.Get(imageKey(rng.IntN(n)))
				if err != nil {
					t.Error(err)
					return
				}
				held[r] = append(held[r], e)
				reads.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for round := range 30 {
		for range 200 {
			i := rng.IntN(n)
			version[i]++
			if _, err := s.Put(imageKey(i), imageValue(i, version[i])); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Checkpoint(); err != nil {
			t.Fatalf("checkpoint %d: %v", round, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	total := 0
	for _, h := range held {
		for _, e := range h {
			i, err := strconv.Atoi(string(e.Key[1:]))
			if err != nil || !bytes.Equal(e.Value, imageValue(i, e.Version)) {
				t.Fatalf("an entry held across swaps reads %q = %q (version %d)", e.Key, e.Value, e.Version)
			}
			total++
		}
	}
	if reads.Load() == 0 || total == 0 {
		t.Fatal("the readers read nothing")
	}
	if st := s.Stats(); st.Checkpoints < 30 {
		t.Fatalf("%d checkpoints, want 31", st.Checkpoints)
	}
	// The store still reads right after the swaps, through both scans.
	want := map[string]string{}
	for i := range n {
		want[string(imageKey(i))] = string(imageValue(i, version[i]))
	}
	got := map[string]string{}
	for e, err := range s.ScanView(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[string(e.Key)] = string(e.Value)
	}
	if !mapsEqual(got, want) || !mapsEqual(dumpStore(s), want) {
		t.Fatal("the map after the swaps differs from the writes")
	}
}

// TestScanViewReusesMemory checks what ScanView's contract allows: over
// keys read from the image, an entry's bytes are overwritten by a later
// step (so a caller that keeps one must copy it), while ScanErr's stay.
// Were ScanView to copy like ScanErr, the test would fail, and the
// figure bench/README.md gives for it would be ScanErr's.
func TestScanViewReusesMemory(t *testing.T) {
	s, err := kv.Open(t.TempDir(), &kv.Options{CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var txn kv.Txn
	for i := range 2000 {
		txn.Then = append(txn.Then, kv.PutOp(imageKey(i), imageValue(i, 1)))
	}
	if _, err := s.Txn(txn); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	var kept, stable []kv.Entry
	for e, err := range s.ScanView(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, e)
	}
	for e, err := range s.ScanErr(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		stable = append(stable, e)
	}
	changed := 0
	for i, e := range kept {
		if !bytes.Equal(e.Key, imageKey(i)) {
			changed++
		}
		if !bytes.Equal(stable[i].Key, imageKey(i)) || !bytes.Equal(stable[i].Value, imageValue(i, 1)) {
			t.Fatalf("ScanErr's entry %d reads %q = %q after the scan", i, stable[i].Key, stable[i].Value)
		}
	}
	if changed == 0 {
		t.Fatal("every entry ScanView yielded kept its bytes: it copies")
	}
}
