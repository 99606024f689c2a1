package crashsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// dataDir is where the simulated workloads keep their data directory.
const dataDir = "/data"

// prepare runs ops on a fresh directory with opts and returns the
// directory as it is left after Close, without a checkpoint.
func prepare(ops []kv.Op, opts kv.Options) (State, error) {
	fsys := vfs.NewMem()
	// Through a recorder, which salts the segments with a fixed sequence:
	// the same workload starts from the same bytes every run.
	opts.FS = vfs.NewRecorder(fsys, nil)
	s, err := kv.Open(dataDir, &opts)
	if err != nil {
		return nil, err
	}
	if err := submitAll(s, ops, nil); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	return readState(fsys, dataDir)
}

// submitAll commits ops in order with group commit, recording issue and
// ack events when rec is not nil.
func submitAll(s *kv.Store, ops []kv.Op, rec *vfs.Recorder) error {
	ps := make([]*kv.Pending, len(ops))
	for i, op := range ops {
		if rec != nil {
			rec.Issue(i + 1)
		}
		ps[i] = s.Submit(op)
	}
	for i, p := range ps {
		if _, _, err := p.Wait(); err != nil {
			return fmt.Errorf("operation %d: %w", i+1, err)
		}
		if rec != nil {
			rec.Ack(i + 1)
		}
	}
	return nil
}

// maxReopens bounds how often a traced program reopens its store after a
// failure (the fsync-failure model fails one sync per run).
const maxReopens = 3

// recoverProgram is the traced program of the recovery workloads: open the
// store (recovery), print the map (the article's "ack" events, one per key,
// which are not promises about operations), close. When the open fails (a
// failed sync, under the fsync-failure model) it opens again, as a user
// would, in the same boot.
func recoverProgram(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
	s, err := kv.Open(dir, &opts)
	for try := 0; err != nil && try < maxReopens; try++ {
		s, err = kv.Open(dir, &opts)
	}
	if err != nil {
		return err
	}
	// The article's recovery ends with a checkpoint, as kv DIR dump
	// writes it.
	if s.Stats().RecoveryReplayed > 0 {
		if err := s.Checkpoint(); err != nil {
			s.Close()
			return err
		}
	}
	for range s.Scan(nil, nil) {
		rec.Ack(0)
	}
	return s.Close()
}

// reopener keeps a traced program going after its store failed: it
// closes the store and opens it again in the same boot (the page cache,
// with whatever a failed fdatasync left in it, survives), and says how
// many of the program's operations the store holds.
type reopener struct {
	dir  string
	opts kv.Options
	s    *kv.Store
	rev0 kv.Revision // the revision before the first operation
	n    int         // reopens so far
	// reopened, when set, is told of each store reopen opens.
	reopened func(*kv.Store)
}

func openReopener(dir string, opts kv.Options) (*reopener, error) {
	s, err := kv.Open(dir, &opts)
	if err != nil {
		return nil, err
	}
	return &reopener{dir: dir, opts: opts, s: s, rev0: s.Revision()}, nil
}

// reopen reopens after err, and returns the number of operations the
// reopened store holds: the program goes on with the next one.
func (r *reopener) reopen(err error) (int, error) {
	if !errors.Is(err, kv.ErrFailed) || r.n >= maxReopens {
		return 0, err
	}
	r.n++
	r.s.Close() // fails too: the store is fail-stop
	s, oerr := kv.Open(r.dir, &r.opts)
	if oerr != nil {
		return 0, fmt.Errorf("%w; reopening: %w", err, oerr)
	}
	r.s = s
	if r.reopened != nil {
		r.reopened(s)
	}
	return int(s.Revision() - r.rev0), nil
}

// writesProgram is the traced program of the write workloads: one
// synchronous write at a time, each issued and acknowledged. After a
// failed write it reopens the store in the same boot and goes on from the
// first operation the store does not hold.
func writesProgram(ops []kv.Op) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		r, err := openReopener(dir, opts)
		if err != nil {
			return err
		}
		for i := 0; i < len(ops); {
			rec.Issue(i + 1)
			rev, _, err := r.s.Submit(ops[i]).Wait()
			if err != nil {
				if i, err = r.reopen(fmt.Errorf("operation %d: %w", i+1, err)); err != nil {
					r.s.Close()
					return err
				}
				continue
			}
			rec.AckRev(i+1, uint64(rev))
			i++
		}
		return r.s.Close()
	}
}

// pipelinedProgram submits the operations in waves of 1 to 8 without
// waiting inside a wave, so that they share group commits, and the waves
// race the background checkpoints that the small options start. After a
// failed write it reopens the store, as writesProgram does.
func pipelinedProgram(ops []kv.Op, seed uint64) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		r, err := openReopener(dir, opts)
		if err != nil {
			return err
		}
		return inWaves(r, ops, rand.New(rand.NewPCG(seed, 0x3a7e)), rec, waveHooks{})
	}
}

// waveHooks are what a program adds to inWaves: before runs before each
// wave, given its number from 0; failed runs after a wave with a failed
// write, before the store reopens; done runs after the last wave, before
// the store closes. Any may be nil.
type waveHooks struct {
	before func(wave int)
	failed func()
	done   func()
}

// inWaves submits ops in waves of 1 to 8 (drawn from rng) on r's store,
// as pipelinedProgram describes, reopening after a failed write, and
// closes the store at the end.
func inWaves(r *reopener, ops []kv.Op, rng *rand.Rand, rec *vfs.Recorder, hooks waveHooks) error {
	type inflight struct {
		n int
		p *kv.Pending
	}
	for i, n := 0, 0; i < len(ops); n++ {
		if hooks.before != nil {
			hooks.before(n)
		}
		wave := min(1+rng.IntN(8), len(ops)-i)
		var ps []inflight
		for j := 0; j < wave; j++ {
			rec.Issue(i + 1)
			ps = append(ps, inflight{i + 1, r.s.Submit(ops[i])})
			i++
		}
		var failed error
		for _, f := range ps {
			rev, _, err := f.p.Wait()
			if err != nil {
				if failed == nil {
					failed = fmt.Errorf("operation %d: %w", f.n, err)
				}
				continue
			}
			if failed == nil {
				rec.AckRev(f.n, uint64(rev))
			}
		}
		if failed != nil {
			if hooks.failed != nil {
				hooks.failed()
			}
			var err error
			if i, err = r.reopen(failed); err != nil {
				r.s.Close()
				return err
			}
		}
	}
	if hooks.done != nil {
		hooks.done()
	}
	return r.s.Close()
}

// randomOps generates n mixed operations over a few keys, mostly adds so
// that a double application shows, seeded.
func randomOps(n int, seed uint64) []kv.Op {
	rng := rand.New(rand.NewPCG(seed, 0x0b5))
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var ops []kv.Op
	counters := map[string]bool{}
	for range n {
		k := keys[rng.IntN(len(keys))]
		switch r := rng.IntN(10); {
		case r < 6:
			// add only to a key that holds an integer or is absent
			if !counters[k] {
				ops = append(ops, kv.DeleteOp([]byte(k)))
				counters[k] = true
				continue
			}
			ops = append(ops, kv.AddOp([]byte(k), int64(rng.IntN(100)+1)))
		case r < 8:
			ops = append(ops, kv.PutOp([]byte(k), []byte(strconv.Itoa(rng.IntN(1000)))))
			counters[k] = true
		default:
			ops = append(ops, kv.DeleteOp([]byte(k)))
			counters[k] = true
		}
	}
	return ops
}

// smallOptions make a few hundred operations rotate segments and
// checkpoint several times, each checkpoint keeping about two covered
// segments for watchers and deleting the rest, and Close checkpoint too
// when 512 bytes were logged since the last checkpoint.
var smallOptions = kv.Options{SegmentSize: 1024, CheckpointBytes: 4096, LogRetention: 2048, CloseCheckpointBytes: 512}

// Workloads returns the named workloads; n sizes the generated ones.
func Workloads(n int, seed uint64) ([]Workload, error) {
	article := opmodel.ArticleOps()
	articleDir, err := prepare(article, kv.Options{})
	if err != nil {
		return nil, err
	}
	torn, err := tornTail(articleDir)
	if err != nil {
		return nil, err
	}
	writes := randomOps(n, seed)
	values := valueOps(max(n/3, 12), seed)
	fences := fenceTxns(n, seed)
	leases := leaseSteps(max(n/2, 20), seed)
	tornOps := randomOps(max(n/5, 10), seed+1)
	// Its Close must leave the last records in the log, for tornTail to
	// tear: no checkpoint at Close.
	keepTail := smallOptions
	keepTail.CloseCheckpointBytes = -1
	written, err := prepare(randomOps(20, seed+2), keepTail)
	if err != nil {
		return nil, err
	}
	tornSmall, err := tornTail(written)
	if err != nil {
		return nil, err
	}
	imgSetup, imgOps := imageSetup(n, seed)
	imgDir, err := prepare(imgSetup, imageOptions)
	if err != nil {
		return nil, err
	}
	return []Workload{
		{Name: "recovery", Doc: "the recovery of the article's 17 operations in one segment",
			Dir: dataDir, Initial: articleDir, Program: recoverProgram},
		{Name: "torn-recovery", Doc: "the recovery of a directory whose newest segment ends torn (cockroachdb#68319)",
			Dir: dataDir, Initial: torn, Program: recoverProgram},
		{Name: "writes", Doc: fmt.Sprintf("%d mixed writes, one at a time, with small segments and checkpoints", len(writes)),
			Dir: dataDir, Initial: State{}, Options: smallOptions, Program: writesProgram(writes), Ops: writes},
		{Name: "checkpoint", Doc: fmt.Sprintf("%d writes submitted together, racing background checkpoints", len(writes)),
			Dir: dataDir, Initial: State{}, Options: smallOptions, Program: pipelinedProgram(writes, seed), Ops: writes},
		{Name: "backup", Doc: fmt.Sprintf("%d writes in waves racing background checkpoints and online backups into the directory, every other backup with a checkpoint run while its file is written, each backup checked against the map at its revision", len(writes)),
			Dir: dataDir, Initial: State{}, Options: smallOptions, Program: backupProgram(writes, seed), Ops: writes},
		{Name: "values", Doc: fmt.Sprintf("%d writes in waves, values of up to 6 KiB holding record frames and runs of zeros", len(values)),
			Dir: dataDir, Initial: State{}, Options: valueOptions, Program: pipelinedProgram(values, seed), Ops: values},
		{Name: "torn-writes", Doc: fmt.Sprintf("%d writes, one at a time, into a directory whose newest segment ends torn", len(tornOps)),
			Dir: dataDir, Initial: tornSmall, Options: smallOptions, Program: writesProgram(tornOps), Ops: tornOps},
		{Name: "never", Doc: fmt.Sprintf("%d writes under --sync never, idle now and then (the store marks its log), durable at each Sync", len(writes)),
			Dir: dataDir, Initial: State{}, Options: neverOptions, Program: neverProgram(writes), Ops: writes},
		{Name: "fences", Doc: fmt.Sprintf("%d transactions in waves: a lock taken, lost and retaken, fenced writes with current and stale tokens, compares with Else, and reads as promises", len(fences)),
			Dir: dataDir, Initial: State{}, Options: smallOptions, Program: txnProgram(fences, seed), Txns: fences},
		{Name: "image", Doc: fmt.Sprintf("%d writes in waves over a store whose snapshot is an image of %d keys, shadowing, deleting and re-creating its entries, racing background checkpoints that write and swap in the next image, while a reader reads and scans the image's keys across every swap", len(imgOps), imageKeys),
			Dir: dataDir, Initial: imgDir, Options: imageOptions, Program: imageProgram(imgOps, seed), Ops: imgOps},
		{Name: "leases", Doc: fmt.Sprintf("%d steps on a clock moved by hand: leases granted, keys bound, renewed, revoked, expired by the store's timer, at a write and at a reopen after a restart, and operations on ended leases refused", len(leases)),
			Dir: dataDir, Initial: State{}, Options: leaseOptions, Program: leaseProgram(leases), Leases: leases},
	}, nil
}

// WorkloadNames lists the workloads Workloads returns.
func WorkloadNames() []string {
	return []string{"recovery", "torn-recovery", "torn-writes", "writes", "checkpoint", "backup", "values", "never", "fences", "image", "leases"}
}

// valueOptions give the values workload segments that hold a few of its
// big values each.
var valueOptions = kv.Options{SegmentSize: 16 << 10, CheckpointBytes: 48 << 10, LogRetention: 16 << 10}

// valueOps generates n operations, seeded: counters (adds, so that a
// double application shows) and puts whose values a hostile or unlucky
// client might write: record frames that would be valid in a segment
// (framed as format version 1, with the segment numbers a client can
// predict, and as version 2 with a guessed salt, each claiming the whole
// segment synced) and sector-aligned runs of zeros, in values of 600 bytes
// to 6 KiB, so that a lost page can fall inside one.
func valueOps(n int, seed uint64) []kv.Op {
	rng := rand.New(rand.NewPCG(seed, 0x7a1))
	var ops []kv.Op
	for i := range n {
		if i%3 == 2 {
			ops = append(ops, kv.AddOp([]byte("count"), int64(1+rng.IntN(9))))
			continue
		}
		var v []byte
		for len(v) < 600+rng.IntN(5600) {
			switch rng.IntN(3) {
			case 0:
				v = append(v, forgedFrame(1+uint32(rng.IntN(8)), rng.Uint64())...)
			case 1:
				v = append(v, make([]byte, 512*(1+rng.IntN(3)))...)
			default:
				v = append(v, []byte(strconv.Itoa(i))...)
			}
		}
		ops = append(ops, kv.PutOp([]byte(fmt.Sprintf("v%d", rng.IntN(6))), v))
	}
	return ops
}

// forgedFrame returns a data record frame claiming a huge synced offset,
// built as format version 1 did (for segment seg) and as version 2 does
// for a segment salted with salt.
func forgedFrame(seg uint32, salt uint64) []byte {
	payload := []byte("\x01forged")
	tab := crc32.MakeTable(crc32.Castagnoli)
	v1 := make([]byte, 24, 24+len(payload))
	binary.LittleEndian.PutUint32(v1[4:], uint32(len(payload)))
	v1[8] = 2
	binary.LittleEndian.PutUint32(v1[12:], seg)
	binary.LittleEndian.PutUint64(v1[16:], 1<<40)
	v1 = append(v1, payload...)
	binary.LittleEndian.PutUint32(v1, crc32.Update(0, tab, v1[4:]))
	var sb [8]byte
	binary.LittleEndian.PutUint64(sb[:], salt)
	seed := crc32.Update(0, tab, sb[:])
	v2 := make([]byte, 24, 24+len(payload))
	v2[0] = 2
	binary.LittleEndian.PutUint32(v2[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(v2[8:], 1<<40)
	binary.LittleEndian.PutUint32(v2[16:], crc32.Update(seed, tab, v2[:16]))
	v2 = append(v2, payload...)
	binary.LittleEndian.PutUint32(v2[20:], crc32.Update(crc32.Update(seed, tab, v2[:20]), tab, v2[24:]))
	return append(v1, v2...)
}

// tornTail cuts the newest segment of s in the middle of its last data
// record ("add d 7"), as a power loss during its write would.
func tornTail(s State) (State, error) {
	var newest string
	for n := range s {
		if _, ok := wal.ParseSegmentName(n); ok && n > newest {
			newest = n
		}
	}
	if newest == "" {
		return nil, fmt.Errorf("crashsim: no segment to tear")
	}
	fsys, err := memFS(dataDir, s)
	if err != nil {
		return nil, err
	}
	seg, _ := wal.ParseSegmentName(newest)
	var last wal.Record
	rd := &wal.Reader{FS: fsys, Dir: dataDir}
	if _, err := rd.Scan(seg, true, func(r wal.Record) error { last = r; return nil }); err != nil {
		return nil, err
	}
	if last.Offset == 0 {
		return nil, fmt.Errorf("crashsim: no record to tear in %s", newest)
	}
	out := State{}
	for k, v := range s {
		out[k] = v
	}
	// All but the last byte: a tail longer than a seal record, so that a
	// seal written over it without the cut leaves part of it behind.
	out[newest] = s[newest][:last.End()-1]
	return out, nil
}

// RandomWorkload is a generated workload: n operations from seed, written
// one at a time or in waves (chosen by the seed), with small segments.
func RandomWorkload(n int, seed uint64) Workload {
	ops := randomOps(n, seed)
	w := Workload{Name: fmt.Sprintf("random(seed=%d, ops=%d)", seed, n), Dir: dataDir, Initial: State{}, Ops: ops,
		Options: kv.Options{SegmentSize: int64(512 + seed%4*512), CheckpointBytes: int64(2048 + seed%3*2048), LogRetention: int64(seed%3)*1024 - 1,
			CloseCheckpointBytes: int64(seed%5)*512 - 1}}
	if seed%2 == 0 {
		w.Program = writesProgram(ops)
	} else {
		w.Program = pipelinedProgram(ops, seed)
	}
	w.Doc = fmt.Sprintf("%d generated operations, segments of %d bytes, a checkpoint every %d bytes",
		n, w.Options.SegmentSize, w.Options.CheckpointBytes)
	return w
}

// Shrink looks for the shortest prefix of a failing random workload that
// still fails, halving and then stepping down, and returns its report.
func Shrink(n int, seed uint64, cfg Config) (int, *Report, error) {
	fails := func(k int) (*Report, bool, error) {
		rep, err := Check(RandomWorkload(k, seed), cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, !rep.Ok(), nil
	}
	best, ok, err := fails(n)
	if err != nil || !ok {
		return n, best, err
	}
	lo, hi := 0, n // lo passes (or is untested), hi fails
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		rep, bad, err := fails(mid)
		if err != nil {
			return hi, best, err
		}
		if bad {
			hi, best = mid, rep
		} else {
			lo = mid
		}
	}
	return hi, best, nil
}

// neverOptions are smallOptions under the Never sync mode.
var neverOptions = kv.Options{SegmentSize: 1024, CheckpointBytes: 4096, LogRetention: 2048, CloseCheckpointBytes: 512, Sync: kv.Never}

// neverProgram writes one operation at a time under the Never sync mode,
// where a write returns before it is durable: it promises nothing until
// it calls Sync, every 16 writes, after which every write before is
// durable. Every 5 writes it pauses past the store's idle delay, so that
// the store marks its log while writes are not yet durable.
func neverProgram(ops []kv.Op) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		s, err := kv.Open(dir, &opts)
		if err != nil {
			return err
		}
		for i, op := range ops {
			rec.Issue(i + 1)
			rev, _, err := s.Submit(op).Wait()
			if err != nil {
				s.Close()
				return fmt.Errorf("operation %d: %w", i+1, err)
			}
			if (i+1)%5 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
			if (i+1)%16 == 0 || i+1 == len(ops) {
				if err := s.Sync(); err != nil {
					s.Close()
					return err
				}
				rec.AckRev(i+1, uint64(rev))
			}
		}
		return s.Close()
	}
}

// fenceTxns generates n transactions, seeded, around a lock key: a holder
// acquires the lock by creating its key if it is absent (its create
// revision is the fencing token), writes under the fence, sometimes with
// a stale token, loses the lock (delete) and another holder re-creates
// it; counters (adds, so that a double application shows) and compares
// with an Else branch in between. Tokens come from a run of the
// reference on the operations so far: the lock's current create revision
// or an earlier one. Submitted in waves, a delete, a re-creation and a
// stale fenced write land in one group commit, whose fence must be judged
// against the group being formed.
func fenceTxns(n int, seed uint64) []kv.Txn {
	rng := rand.New(rand.NewPCG(seed, 0xfe9c))
	lock := []byte("lock")
	var txns []kv.Txn
	h := opmodel.NewHistory(nil, 0)
	var tokens []record.Revision // create revisions the lock has had
	commit := func(t kv.Txn) {
		txns = append(txns, t)
		if ops, why := evaluate(h, &t); why == "" && len(ops) > 0 {
			h.Commit(ops) // an add past int64 commits nothing, as in the store
		}
	}
	for len(txns) < n {
		switch r := rng.IntN(10); {
		case r < 2: // acquire
			commit(kv.Txn{If: []kv.Compare{kv.Absent(lock)}, Then: []kv.Op{kv.PutOp(lock, []byte(fmt.Sprintf("holder%d", rng.IntN(4))))}})
			if e, ok := h.Lookup(lock); ok && (len(tokens) == 0 || tokens[len(tokens)-1] != e.CreateRev) {
				tokens = append(tokens, e.CreateRev)
			}
		case r < 3: // the lock is lost: deleted, then taken again at once
			commit(kv.Txn{Then: []kv.Op{kv.DeleteOp(lock)}})
		case r < 7 && len(tokens) > 0: // a fenced write, the token current or stale
			tok := tokens[len(tokens)-1]
			if rng.IntN(3) == 0 {
				tok = tokens[rng.IntN(len(tokens))]
			}
			k := []byte(fmt.Sprintf("shard%d", rng.IntN(3)))
			commit(kv.Txn{Fence: &kv.Fence{Key: lock, Token: tok}, Then: []kv.Op{kv.AddOp(k, int64(1+rng.IntN(9)))}})
		case r < 8: // a compare with an Else branch
			commit(kv.Txn{If: []kv.Compare{kv.CompareModRev([]byte("c"), kv.Less, h.Revision()/2)},
				Then: []kv.Op{kv.AddOp([]byte("c"), 1)}, Else: []kv.Op{kv.AddOp([]byte("else"), 1), kv.PutOp([]byte("last"), []byte("else"))}})
		default:
			commit(kv.Txn{Then: []kv.Op{kv.AddOp([]byte("c"), int64(1+rng.IntN(9)))}})
		}
	}
	return txns
}

// txnProgram submits the transactions in waves of 1 to 8 from one
// goroutine (so that they commit in that order) without waiting inside a
// wave, and records each one's outcome: committed at its revision, or
// refused. A reader goroutine reads the keys meanwhile and records what it
// saw as a promise: reads show only durable state, so the revision of
// every entry read must survive any crash after the read.
func txnProgram(txns []kv.Txn, seed uint64) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		s, err := kv.Open(dir, &opts)
		if err != nil {
			return err
		}
		stop := make(chan struct{})
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			keys := [][]byte{[]byte("lock"), []byte("c"), []byte("shard0"), []byte("shard1"), []byte("else")}
			seen := kv.Revision(0) // a read promises only what is new
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if e, err := s.Get(keys[i%len(keys)]); err == nil && e.ModRev > seen {
					seen = e.ModRev
					rec.Read(uint64(e.ModRev))
				}
				runtime.Gosched()
			}
		}()
		defer func() { close(stop); <-readerDone }()
		rng := rand.New(rand.NewPCG(seed, 0x7c2))
		type inflight struct {
			n int
			p *kv.Pending
		}
		for i := 0; i < len(txns); {
			wave := min(1+rng.IntN(8), len(txns)-i)
			var ps []inflight
			for j := 0; j < wave; j++ {
				rec.Issue(i + 1)
				ps = append(ps, inflight{i + 1, s.SubmitTxn(txns[i])})
				i++
			}
			for _, f := range ps {
				rev, _, err := f.p.Wait()
				res := f.p.Result()
				switch {
				case errors.Is(err, kv.ErrFailed):
					s.Close()
					return fmt.Errorf("operation %d: %w", f.n, err)
				case err != nil:
					rec.Refused(f.n, err.Error())
				case !res.Committed:
					rec.Refused(f.n, "nothing to commit")
				default:
					rec.AckRev(f.n, uint64(rev))
				}
			}
		}
		return s.Close()
	}
}
