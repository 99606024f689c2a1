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
// Scans and ScanErrs on several goroutines keep entries they read across
// later swaps, and each kept entry, when it leaves its reader's ring and
// again at the end, still holds the value of its key at its version. It
// runs on the real file system, so the images are mapped. Were an entry a
// slice of a mapping, the unmap would turn its bytes into a fault, or a
// reuse of the address into other bytes (mutants/kv-get-slices-mapping).
//
// Everything it does is bounded by counts, not by the clock: the writer
// makes swapRounds rounds, each a checkpoint (the swap) and then
// swapPuts durable puts; a reader reads at most swapReads entries in a
// round, starting as the round's checkpoint starts, and keeps every
// swapKeepEvery-th in a ring of swapRing entries. The ring holds more than
// a round's keeps, so every kept entry is held across at least one swap
// before it is checked, and what the test holds stays under readers ×
// swapRing entries however slow the disk is.
func TestSwapUnderReaders(t *testing.T) {
	const (
		n             = 3000
		readers       = 4
		swapRounds    = 30
		swapPuts      = 200
		swapReads     = 4000
		swapKeepEvery = 8
		swapRing      = 3 * swapReads / swapKeepEvery
	)
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
	// check reports a kept entry whose bytes are no longer those it was
	// read with.
	check := func(e kv.Entry) error {
		i, err := strconv.Atoi(string(e.Key[1:]))
		if err != nil || !bytes.Equal(e.Value, imageValue(i, e.Version)) {
			return fmt.Errorf("an entry held across swaps reads %q = %q (version %d)", e.Key, e.Value, e.Version)
		}
		return nil
	}
	// started[r] is closed as round r's checkpoint starts, ended[r] once
	// its puts are done; round holds the round under way.
	started := make([]chan struct{}, swapRounds)
	ended := make([]chan struct{}, swapRounds)
	for r := range swapRounds {
		started[r], ended[r] = make(chan struct{}), make(chan struct{})
	}
	var round atomic.Int64
	var wg sync.WaitGroup
	var reads, checked atomic.Int64
	errs := make(chan error, readers)
	for id := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			ring := make([]kv.Entry, 0, swapRing)
			next := 0 // the ring's oldest entry, once it is full
			read := 0
			keep := func(e kv.Entry) error {
				if read++; read%swapKeepEvery != 0 {
					return nil
				}
				if len(ring) < swapRing {
					ring = append(ring, e)
					return nil
				}
				old := ring[next]
				ring[next] = e
				next = (next + 1) % swapRing
				checked.Add(1)
				return check(old)
			}
			fail := func(err error) {
				errs <- err
				for r := range ended { // let the writer finish
					<-ended[r]
				}
			}
			for r := 0; r < swapRounds; r = int(round.Load()) {
				<-started[r]
				for quota := swapReads; quota > 0; {
					select {
					case <-ended[r]:
						quota = 0
						continue
					default:
					}
					if rng.IntN(50) == 0 {
						k := 0
						for e, err := range s.ScanErr(imageKey(rng.IntN(n)), nil) {
							if err != nil {
								fail(err)
								return
							}
							if err := keep(e); err != nil {
								fail(err)
								return
							}
							if k++; k == 400 || k == quota {
								break
							}
						}
						quota -= k
						reads.Add(int64(k))
						continue
					}
					e, err := s.Get(imageKey(rng.IntN(n)))
					if err != nil {
						fail(err)
						return
					}
					if err := keep(e); err != nil {
						fail(err)
						return
					}
					quota--
					reads.Add(1)
				}
				<-ended[r]
			}
			for _, e := range ring {
				if err := check(e); err != nil {
					errs <- err
					return
				}
				checked.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for r := range swapRounds {
		close(started[r])
		if err := s.Checkpoint(); err != nil {
			t.Fatalf("checkpoint %d: %v", r, err)
		}
		for range swapPuts {
			i := rng.IntN(n)
			version[i]++
			if _, err := s.Put(imageKey(i), imageValue(i, version[i])); err != nil {
				t.Fatal(err)
			}
		}
		round.Store(int64(r + 1))
		close(ended[r])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 || checked.Load() == 0 {
		t.Fatal("the readers read nothing")
	}
	t.Logf("%d entries read, %d kept and checked after later swaps", reads.Load(), checked.Load())
	if st := s.Stats(); st.Checkpoints < swapRounds {
		t.Fatalf("%d checkpoints, want %d", st.Checkpoints, swapRounds+1)
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
