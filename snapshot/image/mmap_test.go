package image

import (
	"bytes"
	"errors"
	"iter"
	"math/rand/v2"
	"path"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
)

// TestFaultIsAnError raises a real SIGBUS under the Reader: the image
// file is cut short under its mapping, and a read of a block past the cut
// must return an error matching vfs.ErrMapFault, naming the file, not
// crash, and the Reader stays usable (Len, Close). Without the fault guard in
// GetAppend the test binary dies ("fatal error: fault").
func TestFaultIsAnError(t *testing.T) {
	c := makeContent(3000, func(int) int { return 40 }, false)
	name := osFile(t, c.encode(t))
	r, err := Open(vfs.OS, name)
	must(t, err)
	defer r.Close()
	if !r.m.Mapped() {
		t.Fatal("not mapped")
	}
	f, err := vfs.OS.OpenReadWrite(name)
	must(t, err)
	must(t, f.Truncate(2*PageSize)) // page 0 and block 0 stay
	must(t, f.Close())
	last := c.entries[len(c.entries)-1]
	_, _, err = r.Get(last.Key)
	var fe *vfs.FaultError
	if !errors.Is(err, vfs.ErrMapFault) || !errors.As(err, &fe) || fe.File != name || fe.Offset < 2*PageSize {
		t.Errorf("Get past the cut: %v, want a fault in %s past offset %d", err, name, 2*PageSize)
	}
	// A walk reads block 0, before the cut, then faults.
	got, err := collect(r, nil, nil)
	if !errors.Is(err, vfs.ErrMapFault) || len(got) == 0 || len(got) >= len(c.entries) {
		t.Errorf("All past the cut: %d entries, then %v; want block 0's, then a fault", len(got), err)
	}
	// A seek reads the block index, past the cut: it fails at once.
	got, err = collect(r, last.Key, nil)
	if !errors.Is(err, vfs.ErrMapFault) || len(got) != 0 {
		t.Errorf("All from the last key, past the cut: %d entries, then %v", len(got), err)
	}
	if r.Len() != len(c.entries) {
		t.Errorf("Len after the cut: %d", r.Len())
	}
	if err := r.Verify(); !errors.Is(err, vfs.ErrMapFault) {
		t.Errorf("Verify past the cut: %v", err)
	}
}

// TestReadFaultInjected serves an image through the fault injector: a
// read error at open is Open's error, not a half-open Reader.
func TestReadFaultInjected(t *testing.T) {
	c := makeContent(100, func(int) int { return 10 }, false)
	fs, name := memFile(t, c.encode(t))
	in := &vfs.Inject{FS: fs, Rule: func(op vfs.Op) error {
		if op.Kind == vfs.OpRead {
			return errors.New("injected")
		}
		return nil
	}}
	if _, err := Open(in, name); err == nil {
		t.Fatal("Open through a failing read: no error")
	}
}

// TestSwapUnderReaders shows that a use of a mapping after its unmap is
// impossible through the API: readers Get and iterate while the images
// they read are closed and replaced (as a checkpoint will swap them), and
// every entry they got is read again after every image is closed and
// unmapped. Were an entry's bytes a slice of a mapping (try decode
// without its copy), reading them then would fault: the test would crash
// or see wrong bytes.
//
// Its work and memory are bounded by counts: each reader gets at most
// swapQuota entries (and keeps them all), and a swap waits for 20 more
// reads only while some reader still has quota left.
func TestSwapUnderReaders(t *testing.T) {
	const swapQuota = 20000
	c := makeContent(2000, func(i int) int { return i % 50 }, false)
	img := c.encode(t)
	dir := t.TempDir()
	var mu sync.Mutex
	cur, err := Open(vfs.OS, osFileIn(t, dir, "0", img))
	must(t, err)
	get := func() *Reader { mu.Lock(); defer mu.Unlock(); return cur }

	var wg sync.WaitGroup
	held := make([][]record.Entry, 4)
	stop := make(chan struct{})
	var reads atomic.Int64    // entries the readers got
	var finished atomic.Int64 // readers whose quota is spent
	for g := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer finished.Add(1)
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for n := 0; len(held[g]) < swapQuota; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r := get()
				if n%10 == 0 {
					// An iteration, held open across a swap now and then.
					for e, err := range r.All(nil, nil) {
						if err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Error(err)
							}
							break
						}
						held[g] = append(held[g], *e) // lent: the copy below is what is kept
						held[g][len(held[g])-1].Key = bytes.Clone(e.Key)
						held[g][len(held[g])-1].Value = bytes.Clone(e.Value)
						reads.Add(1)
						if rng.IntN(100) == 0 || len(held[g]) == swapQuota {
							break
						}
					}
					continue
				}
				e, ok, err := r.Get(c.entries[rng.IntN(len(c.entries))].Key)
				if errors.Is(err, ErrClosed) {
					continue
				}
				if err != nil || !ok {
					t.Errorf("Get: %v, %v", ok, err)
					return
				}
				held[g] = append(held[g], e)
				reads.Add(1)
			}
		}()
	}
	var old []*Reader
	for i := 1; i <= 30; i++ {
		// Each image serves some reads before it is swapped out: an
		// open takes microseconds, less than a reader's first turn.
		deadline := time.Now().Add(10 * time.Second)
		for seen := reads.Load(); reads.Load() < seen+20 && finished.Load() < int64(len(held)); {
			if time.Now().After(deadline) {
				t.Fatalf("swap %d: the readers got nothing for 10 s", i)
			}
			runtime.Gosched()
		}
		r, err := Open(vfs.OS, osFileIn(t, dir, string(rune('a'+i%26))+string(rune('0'+i/26)), img))
		must(t, err)
		mu.Lock()
		prev := cur
		cur = r
		mu.Unlock()
		must(t, prev.Close())
		old = append(old, prev)
	}
	close(stop)
	wg.Wait()
	must(t, cur.Close())
	old = append(old, cur)
	for _, r := range old {
		<-r.unmapped // every image is unmapped now
	}
	want := map[string]*record.Entry{}
	for i := range c.entries {
		want[string(c.entries[i].Key)] = &c.entries[i]
	}
	total := 0
	for _, h := range held {
		for _, e := range h {
			if w := want[string(e.Key)]; w == nil || !equalEntry(e, w) {
				t.Fatalf("an entry held past the unmap reads %q = %q", e.Key, e.Value)
			}
			total++
		}
	}
	if total == 0 {
		t.Fatal("the readers got nothing")
	}
}

func osFileIn(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := path.Join(dir, name)
	f, err := vfs.OS.Create(p)
	must(t, err)
	_, err = f.WriteAt(b, 0)
	must(t, err)
	must(t, f.Close())
	return p
}

// TestIterationHoldsTheMapping checks that Close during an iteration
// leaves the mapping in place until the iteration ends, and unmaps it
// then; and that a Close with nothing in progress unmaps at once.
func TestIterationHoldsTheMapping(t *testing.T) {
	c := makeContent(500, func(int) int { return 30 }, false)
	name := osFile(t, c.encode(t))
	r, err := Open(vfs.OS, name)
	must(t, err)
	next, stop := iter.Pull2(r.All(nil, nil))
	if e, err, ok := next(); !ok || err != nil || !bytes.Equal(e.Key, c.entries[0].Key) {
		t.Fatalf("first step: %v, %v", ok, err)
	}
	must(t, r.Close())
	select {
	case <-r.unmapped:
		t.Fatal("unmapped under an iteration")
	default:
	}
	if _, _, err := r.Get(c.entries[1].Key); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	// The iteration goes on over the mapping it holds.
	for i := 1; i < 300; i++ {
		e, err, ok := next()
		if !ok || err != nil || !equalEntry(*e, &c.entries[i]) {
			t.Fatalf("step %d after Close: %v, %v", i, ok, err)
		}
	}
	stop()
	select {
	case <-r.unmapped:
	default:
		t.Fatal("not unmapped once the iteration ended")
	}

	r, err = Open(vfs.OS, name)
	must(t, err)
	must(t, r.Close())
	select {
	case <-r.unmapped:
	default:
		t.Fatal("Close with nothing in progress did not unmap")
	}
}

// TestCloneHoldsTheMapping checks that a clone reads on after the handle
// it came from is closed, keeps the mapping until it is closed too, and
// that a closed handle cannot be cloned; and Has against Get.
func TestCloneHoldsTheMapping(t *testing.T) {
	c := makeContent(500, func(int) int { return 30 }, false)
	r, err := Open(vfs.OS, osFile(t, c.encode(t)))
	must(t, err)
	cl, err := r.Clone()
	must(t, err)
	must(t, r.Close())
	must(t, r.Close()) // a second Close drops nothing more
	if _, err := r.Clone(); !errors.Is(err, ErrClosed) {
		t.Errorf("Clone of a closed handle: %v", err)
	}
	select {
	case <-r.unmapped:
		t.Fatal("unmapped while a clone is open")
	default:
	}
	for i := range c.entries {
		e, ok, err := cl.Get(c.entries[i].Key)
		if !ok || err != nil || !equalEntry(e, &c.entries[i]) {
			t.Fatalf("clone's Get %q: %v, %v", c.entries[i].Key, ok, err)
		}
		if ok, err := cl.Has(c.entries[i].Key); !ok || err != nil {
			t.Fatalf("Has %q: %v, %v", c.entries[i].Key, ok, err)
		}
	}
	if ok, err := cl.Has([]byte("\xffnot a key")); ok || err != nil {
		t.Errorf("Has of a missing key: %v, %v", ok, err)
	}
	must(t, cl.Close())
	select {
	case <-r.unmapped:
	default:
		t.Fatal("not unmapped once the last handle closed")
	}
	if _, err := cl.Has(c.entries[0].Key); !errors.Is(err, ErrClosed) {
		t.Errorf("Has after Close: %v", err)
	}
}
