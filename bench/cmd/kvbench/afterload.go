package main

// The states of issue 41, which an outside harness found slow and the
// other workloads do not reach: a store loaded without a sync per batch
// and reopened (in the loading process, and in a fresh one), and a
// store whose writer was killed with a full log tail. See bench/README.md,
// "Unsynced load, reopen and kill".

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvstore/kv/bench/engine"
	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/kv"
)

// unsyncedOptions are the options of every store of these workloads, at
// the load and at each reopen: writes acknowledged before they are
// durable (kv: Sync: kv.Never; pebble: pebble.NoSync; bbolt: NoSync;
// badger: SyncWrites false; walmap and raw: no fdatasync per write), each
// engine's checkpoints and flushes as by default.
func unsyncedOptions(c config) engine.Options {
	return engine.Options{NoSync: true, LogBytes: c.LogBytes}
}

// loadUnsynced writes the data set at generation 0 in batches of Batch,
// unsynced, then makes it durable with one Sync.
func loadUnsynced(e engine.Engine, c config) error {
	var keys, values [][]byte
	for lo := 0; lo < c.Keys; lo += c.Batch {
		keys, values = fillBatch(keys, values, lo, min(lo+c.Batch, c.Keys), 0)
		if err := e.PutBatch(keys, values); err != nil {
			return err
		}
	}
	return e.Sync()
}

// scanRate runs a full ordered scan, checked as checkScan checks it, and
// returns its rate in keys per second.
func scanRate(e engine.Engine, keys int) (float64, error) {
	d, err := timedScan(e, keys)
	return float64(keys) / d.Seconds(), err
}

// childAfterLoad loads the data set unsynced (loadUnsynced), closes the
// store, reopens it in the same process, and runs two full ordered scans:
// the load's rate, the reopen's time, each scan's rate, and the peak RSS
// of the whole sequence.
func childAfterLoad(t *task, res *result) error {
	c, o := t.Config, unsyncedOptions(t.Config)
	e, err := engine.Open(t.Engine, t.Dir, o)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := loadUnsynced(e, c); err != nil {
		e.Close()
		return err
	}
	res.Metrics["load.unsynced.kps"] = float64(c.Keys) / time.Since(start).Seconds()
	if err := e.Close(); err != nil {
		return err
	}
	if t.Engine == "raw" {
		// The peak before the read-back: the process's fixed cost and
		// the load's buffers.
		if err := recordRSS(res, "afterload", c.Keys); err != nil {
			return err
		}
		return checkRawLoad(t)
	}
	start = time.Now()
	if e, err = engine.Open(t.Engine, t.Dir, o); err != nil {
		return err
	}
	res.Metrics["reopen.afterload.same.s"] = time.Since(start).Seconds()
	for _, pass := range []string{"first", "second"} {
		kps, err := scanRate(e, c.Keys)
		if err != nil {
			e.Close()
			return fmt.Errorf("%s scan: %w", pass, err)
		}
		res.Metrics["scan.afterload.same."+pass+".kps"] = kps
	}
	if err := checkSample(e, c.Keys, 0); err != nil {
		e.Close()
		return err
	}
	res.Note = noteOf(e)
	if err := e.Close(); err != nil {
		return err
	}
	return recordRSS(res, "afterload", c.Keys)
}

// recordRSS records the process's peak RSS as name.rss, and per key as
// name.rsskey.
func recordRSS(res *result, name string, keys int) error {
	rss, err := peakRSS()
	if err != nil {
		return err
	}
	res.Metrics[name+".rss"] = rss
	res.Metrics[name+".rsskey"] = rss / float64(keys)
	return nil
}

// childAfterLoadWrite loads the data set as childAfterLoad does and
// closes the store, for childAfterLoadFresh to reopen in a process of its
// own.
func childAfterLoadWrite(t *task, res *result) error {
	e, err := engine.Open(t.Engine, t.Dir, unsyncedOptions(t.Config))
	if err != nil {
		return err
	}
	if err := loadUnsynced(e, t.Config); err != nil {
		e.Close()
		return err
	}
	return e.Close()
}

// childAfterLoadFresh reopens the store childAfterLoadWrite closed (the
// page cache as that process left it) and times the open and a first full
// ordered scan.
func childAfterLoadFresh(t *task, res *result) error {
	c := t.Config
	start := time.Now()
	e, err := engine.Open(t.Engine, t.Dir, unsyncedOptions(c))
	if err != nil {
		return err
	}
	res.Metrics["reopen.afterload.fresh.s"] = time.Since(start).Seconds()
	kps, err := scanRate(e, c.Keys)
	if err == nil {
		err = checkSample(e, c.Keys, 0)
	}
	if err != nil {
		e.Close()
		return err
	}
	res.Metrics["scan.afterload.fresh.first.kps"] = kps
	res.Note = noteOf(e)
	return e.Close()
}

// killLogBytes is the kv log the kill workload leaves behind its last
// checkpoint: 15/16 of the CheckpointBytes the store runs with, so that
// no checkpoint starts.
func killLogBytes(c config) int64 {
	b := c.LogBytes
	if b <= 0 {
		b = kv.DefaultCheckpointBytes
	}
	return b - b/16
}

// killTailPuts is how many puts make killLogBytes of kv's log.
func killTailPuts(c config) int {
	return int(killLogBytes(c) / int64(kvLogBytesPerPut()))
}

// tailWriter writes the kill workload's puts, one at a time and unsynced:
// put i sets the data set's key i%Keys to generation 1+i/Keys. bbolt, which
// has no log, gets them as Updates of Batch.
type tailWriter struct {
	e     engine.Engine
	c     config
	bolt  bool
	n     int // puts written
	k, v  []byte
	ks    [][]byte
	vs    [][]byte
	limit int // the most puts the workload may write
}

func (w *tailWriter) put(count int) error {
	if w.n+count > w.limit {
		return fmt.Errorf("the log tail took more than %d puts to fill", w.limit)
	}
	if w.bolt {
		for lo := w.n; lo < w.n+count; lo += w.c.Batch {
			hi := min(lo+w.c.Batch, w.n+count)
			w.ks, w.vs = w.ks[:0], w.vs[:0]
			for i := lo; i < hi; i++ {
				k := dataset.Key(make([]byte, keySize), i%w.c.Keys)
				w.ks = append(w.ks, k)
				w.vs = append(w.vs, dataset.Value(make([]byte, valueSize), k, uint64(1+i/w.c.Keys)))
			}
			if err := w.e.PutBatch(w.ks, w.vs); err != nil {
				return err
			}
		}
		w.n += count
		return nil
	}
	for i := w.n; i < w.n+count; i++ {
		dataset.Key(w.k, i%w.c.Keys)
		if err := w.e.Put(w.k, dataset.Value(w.v, w.k, uint64(1+i/w.c.Keys))); err != nil {
			return err
		}
	}
	w.n += count
	return nil
}

// killGen is the generation of key j after the load and n tail puts.
func killGen(j, n, keys int) uint64 {
	if j >= n {
		return 0
	}
	return uint64(1 + (n-1-j)/keys)
}

// newestLog returns the highest number among dir's files named
// NUMBER+ext or NUMBER-...+ext: pebble's WAL files (.log) and badger's
// memtable logs (.mem), each of which starts a new one when its memtable
// fills.
func newestLog(dir, ext string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	newest := int64(-1)
	for _, d := range ents {
		name, ok := strings.CutSuffix(d.Name(), ext)
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "-")
		if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			newest = max(newest, n)
		}
	}
	if newest < 0 {
		return 0, fmt.Errorf("no *%s file in %s", ext, dir)
	}
	return newest, nil
}

// fillMemtable fills pebble's or badger's memtable to 9/10 of what one
// holds, counted in puts: it writes until a new log file starts (the
// memtable rotated), then counts the puts from one rotation to the next
// until two counts in a row agree within a tenth (pebble's memtables
// grow from 256 KiB to their full size), then writes 9/10 of that count
// minus a chunk, and checks that no memtable rotated during that last
// part. It returns the puts written since the last rotation seen (fewer
// than a chunk after the rotation itself).
func fillMemtable(w *tailWriter, dir, ext string) (int, error) {
	const chunk = 100 // puts between two looks at the directory
	rotate := func() (int, error) {
		n0, err := newestLog(dir, ext)
		if err != nil {
			return 0, err
		}
		for {
			if err := w.put(chunk); err != nil {
				return 0, err
			}
			n, err := newestLog(dir, ext)
			if err != nil || n != n0 {
				return w.n, err
			}
		}
	}
	last, err := rotate()
	if err != nil {
		return 0, err
	}
	per, prev := 0, -1
	for prev < 0 || per-prev > prev/10 || prev-per > prev/10 {
		at, err := rotate() // w.put bounds the loop
		if err != nil {
			return 0, err
		}
		prev, per, last = per, at-last, at
		if prev == 0 {
			prev = -1
		}
	}
	n0, err := newestLog(dir, ext)
	if err != nil {
		return 0, err
	}
	if more := per*9/10 - chunk; more > 0 {
		if err := w.put(more); err != nil {
			return 0, err
		}
	}
	if n, err := newestLog(dir, ext); err != nil || n != n0 {
		return 0, errors.Join(err, fmt.Errorf("a memtable rotated while the tail was filled to 9/10 of %d puts", per))
	}
	return w.n - last, nil
}

// childKillWrite loads the data set unsynced, empties the log (kv
// checkpoints; pebble and badger rotate their memtables in the
// fill), writes unsynced small puts until the log since then is nearly
// what makes the engine checkpoint or flush, syncs, prints its result,
// and waits for the parent's SIGKILL: no Close. kv's tail is 15/16 of its
// CheckpointBytes; pebble's and badger's 9/10 of a memtable; walmap, which
// never checkpoints, and bbolt, which has no log, get as many puts as kv.
func childKillWrite(t *task, res *result) error {
	c := t.Config
	e, err := engine.Open(t.Engine, t.Dir, unsyncedOptions(c))
	if err != nil {
		return err
	}
	if err := loadUnsynced(e, c); err != nil {
		return err
	}
	cp, isKV := e.(interface {
		Checkpoint() error
		LogStats() (logged, checkpoints int64)
	})
	if isKV {
		if err := cp.Checkpoint(); err != nil {
			return err
		}
	}
	w := &tailWriter{e: e, c: c, bolt: t.Engine == "bbolt", k: make([]byte, keySize), v: make([]byte, valueSize),
		limit: 4 * int(max(64<<20, c.LogBytes)) / 100} // more puts than any memtable holds
	start := time.Now()
	tail := killTailPuts(c)
	switch t.Engine {
	case "pebble":
		tail, err = fillMemtable(w, t.Dir, ".log")
	case "badger":
		tail, err = fillMemtable(w, t.Dir, ".mem")
	case "kv":
		logged0, cps0 := cp.LogStats()
		err = w.put(tail)
		logged, cps := cp.LogStats()
		if err == nil && cps != cps0 {
			err = fmt.Errorf("%d checkpoints ran while the tail was written", cps-cps0)
		}
		res.Metrics["killed.logbytes"] = float64(logged - logged0)
	default:
		err = w.put(tail)
	}
	if err != nil {
		return err
	}
	if err := e.Sync(); err != nil {
		return err
	}
	res.Metrics["killed.write.s"] = time.Since(start).Seconds()
	res.Metrics["killed.puts"] = float64(tail)
	res.Metrics["killed.allputs"] = float64(w.n)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return err
	}
	pprof.StopCPUProfile()
	// The parent kills this process with SIGKILL once it has read the
	// result; the store stays open until then, its locks held.
	time.Sleep(10 * time.Minute)
	return errors.New("not killed within 10 minutes")
}

// childKillOpen reopens the store childKillWrite's process left when it
// was killed (the page cache as it left it) and times the open and a
// first full ordered scan; then it checks a sample of the tail's
// generations.
func childKillOpen(t *task, res *result) error {
	c := t.Config
	start := time.Now()
	e, err := engine.Open(t.Engine, t.Dir, unsyncedOptions(c))
	if err != nil {
		return err
	}
	res.Metrics["reopen.killed.s"] = time.Since(start).Seconds()
	fail := func(err error) error { e.Close(); return err }
	kps, err := scanRate(e, c.Keys)
	if err != nil {
		return fail(err)
	}
	res.Metrics["scan.killed.first.kps"] = kps
	r := rand.New(rand.NewPCG(5, 7))
	k := make([]byte, keySize)
	for range min(10000, c.Keys) {
		j := r.IntN(c.Keys)
		if err := expectGen(e, dataset.Key(k, j), killGen(j, t.Puts, c.Keys)); err != nil {
			return fail(err)
		}
	}
	res.Note = noteOf(e)
	return e.Close()
}

// killedChild runs t (a killwrite) in a new process, reads its result,
// and kills it with SIGKILL.
func (r *runner) killedChild(t task) (result, error) {
	cmd, err := r.command(&t)
	if err != nil {
		return result{}, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	var res result
	derr := json.NewDecoder(out).Decode(&res)
	kerr := cmd.Process.Kill()
	werr := cmd.Wait()
	if derr != nil {
		return result{}, fmt.Errorf("%s on %s: no result (%v): %w", t.Name, t.Engine, werr, derr)
	}
	if kerr != nil {
		return result{}, fmt.Errorf("%s on %s: kill: %w", t.Name, t.Engine, kerr)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return result{}, fmt.Errorf("%s on %s: the child ended before the kill: %v", t.Name, t.Engine, werr)
	}
	return res, nil
}

// afterLoadRound runs the unsynced load with its reopen in the same
// process, then the same load and a reopen in a fresh process, each
// engine in turn.
func (r *runner) afterLoadRound(round int, tag string, engines []string) error {
	for _, e := range engines {
		d := r.dir("afterload-" + e)
		res, err := r.child(task{Name: "afterload", Engine: e, Dir: d})
		os.RemoveAll(d)
		if err != nil {
			return err
		}
		r.record(e, round, "", res)
		m := res.Metrics
		if e == "raw" {
			r.progress("%s unsynced load %-6s %s keys/s, peak RSS %s (%.0f B/key)", tag, e,
				fmtCount(m["load.unsynced.kps"]), fmtMiB(m["afterload.rss"]), m["afterload.rsskey"])
			continue
		}
		r.progress("%s unsynced load %-6s %s keys/s, peak RSS %s (%.0f B/key); reopen in the same process %s, scans %s and %s keys/s %s", tag, e,
			fmtCount(m["load.unsynced.kps"]), fmtMiB(m["afterload.rss"]), m["afterload.rsskey"],
			fmtDur(m["reopen.afterload.same.s"]), fmtCount(m["scan.afterload.same.first.kps"]), fmtCount(m["scan.afterload.same.second.kps"]), res.Note)
	}
	for _, e := range engines {
		if e == "raw" {
			continue
		}
		d := r.dir("afterfresh-" + e)
		_, err := r.child(task{Name: "afterloadwrite", Engine: e, Dir: d})
		if err == nil {
			var res result
			if res, err = r.child(task{Name: "afterloadfresh", Engine: e, Dir: d}); err == nil {
				r.record(e, round, "", res)
				r.progress("%s unsynced load, reopen in a fresh process %-6s %s, first scan %s keys/s %s", tag, e,
					fmtDur(res.Metrics["reopen.afterload.fresh.s"]), fmtCount(res.Metrics["scan.afterload.fresh.first.kps"]), res.Note)
			}
		}
		os.RemoveAll(d)
		if err != nil {
			return err
		}
	}
	return nil
}

// killedRound runs the kill workload, each engine in turn: a writer
// killed with a full log tail, then a fresh process that reopens.
func (r *runner) killedRound(round int, tag string, engines []string) error {
	for _, e := range engines {
		if e == "raw" {
			continue
		}
		d := r.dir("killed-" + e)
		w, err := r.killedChild(task{Name: "killwrite", Engine: e, Dir: d})
		if err == nil {
			r.record(e, round, "", w)
			var res result
			if res, err = r.child(task{Name: "killopen", Engine: e, Dir: d, Puts: int(w.Metrics["killed.allputs"])}); err == nil {
				r.record(e, round, "", res)
				r.progress("%s killed with %d unsynced puts in the log tail %-6s reopen %s, first scan %s keys/s %s", tag, int(w.Metrics["killed.puts"]), e,
					fmtDur(res.Metrics["reopen.killed.s"]), fmtCount(res.Metrics["scan.killed.first.kps"]), res.Note)
			}
		}
		os.RemoveAll(d)
		if err != nil {
			return err
		}
	}
	return nil
}

// command is the command that runs t in a child process.
func (r *runner) command(t *task) (*exec.Cmd, error) {
	t.Config = r.c
	if r.profile != "" {
		name := fmt.Sprintf("%s-%s", t.Name, t.Engine)
		if t.Writers > 0 {
			name += fmt.Sprintf("-%d", t.Writers)
		}
		if t.Readers > 0 {
			name += fmt.Sprintf("-g%d", t.Readers)
		}
		t.Profile = r.profilePath(name)
	}
	arg, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	if l, ok := loadAverage(); ok {
		r.load = append(r.load, l)
	}
	cmd := exec.Command(r.exe, "-child", string(arg))
	cmd.Stderr = os.Stderr
	return cmd, nil
}
