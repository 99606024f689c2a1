package crashsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// The image workload: a store whose snapshot is a large image (a few
// hundred entries in many blocks, as every checkpoint writes it) takes
// writes over the image's keys (puts that shadow entries, deletes that
// leave tombstones, puts over tombstones) mixed with counter adds, in
// waves that race the background checkpoints, each of which writes the
// next image, swaps it in under the store and closes the old one. A
// reader reads the image's keys and scans them all the while, so that
// reads run across every swap: each value it reads must be one its key
// held (the initial one or one a write gave it), and a read may fail
// only because the store closed.

// imageKeys is how many keys the initial image holds.
const imageKeys = 400

// imageOptions make the waves checkpoint several times, each image a few
// dozen KiB.
var imageOptions = kv.Options{SegmentSize: 1024, CheckpointBytes: 2048, LogRetention: 1024}

func imageKey(i int) []byte { return []byte(fmt.Sprintf("img%04d", i)) }

func imageInitial(i int) []byte {
	return []byte(fmt.Sprintf("initial %04d %s", i, string(make([]byte, i%40))))
}

// imageSetup returns the operations that make the initial image and
// the workload's operations: n operations of which about half change
// image keys.
func imageSetup(n int, seed uint64) (setup, ops []kv.Op) {
	for i := range imageKeys {
		setup = append(setup, kv.PutOp(imageKey(i), imageInitial(i)))
	}
	rng := rand.New(rand.NewPCG(seed, 0x1a6e))
	counters := randomOps(n, seed+3)
	for i := range n {
		switch r := rng.IntN(10); {
		case r < 3:
			k := rng.IntN(imageKeys)
			ops = append(ops, kv.PutOp(imageKey(k), []byte("put "+strconv.Itoa(i+1))))
		case r < 5:
			ops = append(ops, kv.DeleteOp(imageKey(rng.IntN(imageKeys))))
		default:
			ops = append(ops, counters[i])
		}
	}
	return setup, ops
}

// imageProgram is pipelinedProgram with a reader beside the writer (see
// the top of the file), which reads whichever store the writer has open.
func imageProgram(ops []kv.Op, seed uint64) Program {
	allowed := map[string]map[string]bool{}
	deletable := map[string]bool{}
	for i := range imageKeys {
		allowed[string(imageKey(i))] = map[string]bool{string(imageInitial(i)): true}
	}
	for _, op := range ops {
		k := string(op.Key)
		switch {
		case allowed[k] == nil:
		case op.Kind == kv.DeleteOp(nil).Kind:
			deletable[k] = true
		default:
			allowed[k][string(op.Value)] = true
		}
	}
	check := func(key, value []byte) error {
		if a := allowed[string(key)]; a != nil && !a[string(value)] {
			return fmt.Errorf("read %s = %q, a value the key never held", key, value)
		}
		return nil
	}
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		r, err := openReopener(dir, opts)
		if err != nil {
			return err
		}
		var (
			cur     atomic.Pointer[kv.Store]
			stop    = make(chan struct{})
			readErr error
			wg      sync.WaitGroup
		)
		cur.Store(r.s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 0x5ead))
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := readOnce(cur.Load(), rng, check, deletable)
				if err != nil && !errors.Is(err, kv.ErrClosed) && !errors.Is(err, kv.ErrFailed) {
					readErr = err
					return
				}
				runtime.Gosched()
			}
		}()
		r.reopened = func(s *kv.Store) { cur.Store(s) }
		err = inWaves(r, ops, rand.New(rand.NewPCG(seed, 0x3a7e)), rec, waveHooks{})
		close(stop)
		wg.Wait()
		if readErr != nil {
			return readErr
		}
		return err
	}
}

// readOnce reads one image key with Get, and now and then scans every
// key, checking each value read.
func readOnce(s *kv.Store, rng *rand.Rand, check func(k, v []byte) error, deletable map[string]bool) error {
	if rng.IntN(20) == 0 {
		for e, err := range s.ScanErr(imageKey(0), imageKey(imageKeys)) {
			if err != nil {
				return err
			}
			if err := check(e.Key, e.Value); err != nil {
				return err
			}
		}
		return nil
	}
	k := imageKey(rng.IntN(imageKeys))
	e, err := s.Get(k)
	switch {
	case errors.Is(err, kv.ErrNotFound) && deletable[string(k)]:
		return nil
	case err != nil:
		return fmt.Errorf("get %s: %w", k, err)
	}
	return check(e.Key, e.Value)
}
