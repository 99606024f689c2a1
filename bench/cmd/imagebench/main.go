// Command imagebench measures the snapshot image (snapshot/image, issue
// 20) against bbolt, pebble and the store as it opens today, on the same
// data: kvbench's data set of 16-byte keys and 100-byte values.
//
//	cd bench
//	go run ./cmd/imagebench                     # 1M keys, 3 rounds
//	go run ./cmd/imagebench -keys 20000 -rounds 1
//
// It builds each store once (the image from the sorted data set; bbolt,
// pebble and kv loaded in batches, kv checkpointed so that its reopen
// loads a snapshot and replays an empty log), then, in each round, runs a
// fresh child process per engine that opens the store with its files in
// the page cache (warm) and reports: the open's time, the heap in use
// and the resident set after it (and what the open added to it: the
// program itself, which links every engine, is most of the rest), random Gets on one goroutine (after a
// warm-up of as many Gets as keys), and a full scan in key order. A cold
// child per mmap engine (image, bbolt) evicts the store's files from the
// page cache (posix_fadvise DONTNEED) and reports the open's time and one
// Get's time and major page faults. Every Get and every scanned entry is
// checked against the data set. No timing is asserted anywhere.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"

	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/bench/engine"
	"github.com/kvstore/kv/bench/internal/runinfo"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// The data set, as kvbench's (cmd/kvbench/data.go: dataKey and value at
// generation 0).
const (
	keySize   = dataset.KeySize
	valueSize = dataset.ValueSize
)

// engines are the stores compared, in the order of the report.
var engines = []string{"image", "bbolt", "kv", "pebble"}

// mmapEngines are the ones whose cold open and first Get are measured.
var mmapEngines = []string{"image", "bbolt"}

func main() {
	keys := flag.Int("keys", 1_000_000, "keys in the data set")
	rounds := flag.Int("rounds", 3, "rounds of children")
	getDur := flag.Duration("get-dur", 2*time.Second, "how long the random Gets run")
	dir := flag.String("dir", "", "where the stores go (default: a new temporary directory, removed at the end)")
	out := flag.String("out", "", "also write the report to this file")
	child := flag.String("child", "", "internal: run one child task")
	flag.Parse()
	var err error
	if *child != "" {
		err = runChild(*child)
	} else {
		err = run(*keys, *rounds, *getDur, *dir, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebench:", err)
		os.Exit(1)
	}
}

// task is one child's job.
type task struct {
	Engine string        `json:"engine"`
	Dir    string        `json:"dir"`
	Keys   int           `json:"keys"`
	Cold   bool          `json:"cold"`
	GetDur time.Duration `json:"get_dur"`
}

type metrics map[string]float64

func run(keys, rounds int, getDur time.Duration, dir, out string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "imagebench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	info := runinfo.Collect("./cmd/imagebench", dir)
	for _, e := range engines {
		start := time.Now()
		if err := build(e, filepath.Join(dir, e), keys); err != nil {
			return fmt.Errorf("build %s: %w", e, err)
		}
		fmt.Fprintf(os.Stderr, "built %s (%d keys) in %v\n", e, keys, time.Since(start).Round(time.Millisecond))
	}
	sizes := map[string]int64{}
	for _, e := range engines {
		n, err := dirBytes(filepath.Join(dir, e))
		if err != nil {
			return err
		}
		sizes[e] = n
	}
	var res []map[string]metrics // per round, per engine (and engine+" cold")
	for r := range rounds {
		rm := map[string]metrics{}
		// Rotate the order, so that no engine always runs first.
		order := slices.Clone(engines)
		for range r {
			order = append(order[1:], order[0])
		}
		for _, e := range order {
			m, err := child(task{Engine: e, Dir: filepath.Join(dir, e), Keys: keys, GetDur: getDur})
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, e, err)
			}
			rm[e] = m
			fmt.Fprintf(os.Stderr, "round %d: %s: %v\n", r+1, e, m)
		}
		for _, e := range mmapEngines {
			m, err := child(task{Engine: e, Dir: filepath.Join(dir, e), Keys: keys, Cold: true})
			if err != nil {
				return fmt.Errorf("round %d, %s cold: %w", r+1, e, err)
			}
			rm[e+" cold"] = m
			fmt.Fprintf(os.Stderr, "round %d: %s cold: %v\n", r+1, e, m)
		}
		res = append(res, rm)
	}
	var w io.Writer = os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	fmt.Fprintf(w, "# imagebench results\n\n%s\n", info.Markdown())
	report(w, res, keys, sizes)
	return nil
}

// child runs t in a new process of this program and returns its figures.
func child(t task) (metrics, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	if t.Cold {
		if err := evict(t.Dir); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(os.Args[0], "-child", string(b)) // the test binary serves too (TestMain)
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var m metrics
	if err := json.Unmarshal(outb, &m); err != nil {
		return nil, fmt.Errorf("child output %q: %w", outb, err)
	}
	return m, nil
}

// evict drops the page cache of every file under dir.
func evict(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}

func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// build makes engine e's store of the data set in dir.
func build(e, dir string, keys int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch e {
	case "image":
		ks := make([]byte, keys*keySize)
		for i := range keys {
			dataset.Key(ks[i*keySize:], i)
		}
		idx := make([]int32, keys)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(a, b int32) int {
			return bytes.Compare(ks[int(a)*keySize:int(a+1)*keySize], ks[int(b)*keySize:int(b+1)*keySize])
		})
		var v [valueSize]byte
		entries := func(yield func(*record.Entry) bool) {
			var en record.Entry
			for n, i := range idx {
				k := ks[int(i)*keySize : int(i+1)*keySize]
				en = record.Entry{Key: k, Value: dataset.Value(v[:], k, 0), CreateRev: record.Revision(n + 1), ModRev: record.Revision(n + 1), Version: 1}
				if !yield(&en) {
					return
				}
			}
		}
		return image.Write(vfs.OS, dir, snapshot.Name, snapshot.Meta{Covered: 1, Revision: record.Revision(keys)}, nil, entries, image.Options{})
	case "kv":
		s, err := kv.Open(dir, nil)
		if err != nil {
			return err
		}
		if err := load(keys, func(ks, vs [][]byte) error {
			ops := make([]kv.Op, len(ks))
			for i := range ks {
				ops[i] = kv.PutOp(ks[i], vs[i])
			}
			_, err := s.Txn(kv.Txn{Then: ops})
			return err
		}); err != nil {
			s.Close()
			return err
		}
		// The reopen loads a snapshot of everything, and an empty log.
		if err := s.Checkpoint(); err != nil {
			s.Close()
			return err
		}
		return s.Close()
	default:
		en, err := engine.Open(e, dir, engine.Options{})
		if err != nil {
			return err
		}
		if err := load(keys, en.PutBatch); err != nil {
			en.Close()
			return err
		}
		return en.Close()
	}
}

// load hands the data set to put in batches of 10,000.
func load(keys int, put func(ks, vs [][]byte) error) error { return dataset.Load(keys, 10_000, put) }

// reader is what a child does with an open store.
type reader interface {
	get(key []byte) ([]byte, error) // the value, valid until the next get
	scan(fn func(key, value []byte) error) error
	close() error
}

type imageReader struct {
	r   *image.Reader
	buf []byte
}

func (ir *imageReader) get(key []byte) ([]byte, error) {
	e, out, ok, err := ir.r.GetAppend(ir.buf[:0], key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("key %x not found", key)
	}
	ir.buf = out
	return e.Value, nil
}

func (ir *imageReader) scan(fn func(key, value []byte) error) error {
	for e, err := range ir.r.All(nil, nil) {
		if err != nil {
			return err
		}
		if err := fn(e.Key, e.Value); err != nil {
			return err
		}
	}
	return nil
}

func (ir *imageReader) close() error { return ir.r.Close() }

type engineReader struct {
	e engine.Engine
	v []byte
}

func (er *engineReader) get(key []byte) ([]byte, error) {
	err := er.e.Get(key, func(v []byte) { er.v = append(er.v[:0], v...) })
	return er.v, err
}

func (er *engineReader) scan(fn func(key, value []byte) error) error {
	var ferr error
	err := er.e.Scan(func(k, v []byte) bool {
		ferr = fn(k, v)
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}

func (er *engineReader) close() error { return er.e.Close() }

func open(t *task) (reader, error) {
	if t.Engine == "image" {
		r, err := image.Open(vfs.OS, filepath.Join(t.Dir, snapshot.Name))
		if err != nil {
			return nil, err
		}
		return &imageReader{r: r}, nil
	}
	e, err := engine.Open(t.Engine, t.Dir, engine.Options{})
	if err != nil {
		return nil, err
	}
	return &engineReader{e: e}, nil
}

func runChild(arg string) error {
	var t task
	if err := json.Unmarshal([]byte(arg), &t); err != nil {
		return err
	}
	m := metrics{}
	rss0 := procStatus("VmRSS")
	faults0 := majorFaults()
	start := time.Now()
	r, err := open(&t)
	if err != nil {
		return err
	}
	m["open.s"] = time.Since(start).Seconds()
	m["open.majflt"] = majorFaults() - faults0
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m["open.heap"] = float64(ms.HeapInuse)
	m["open.rss"] = procStatus("VmRSS")
	m["open.rssadded"] = m["open.rss"] - rss0
	m["open.hwm"] = procStatus("VmHWM")

	var k [keySize]byte
	key := func(n int) []byte { return dataset.Key(k[:], dataset.Pick(n, t.Keys)) }
	faults0 = majorFaults()
	start = time.Now()
	v, err := r.get(key(0))
	if err == nil {
		err = dataset.CheckAt(key(0), v, 0)
	}
	if err != nil {
		return err
	}
	m["get1.s"] = time.Since(start).Seconds()
	m["get1.majflt"] = majorFaults() - faults0
	if !t.Cold {
		// Warm-up: as many Gets as keys, then the timed run.
		for n := range t.Keys {
			if _, err := r.get(key(n)); err != nil {
				return err
			}
		}
		n := 0
		start = time.Now()
		for time.Since(start) < t.GetDur {
			for range 1000 {
				kk := key(t.Keys + n)
				v, err := r.get(kk)
				if err != nil {
					return err
				}
				if n%64 == 0 {
					if err := dataset.CheckAt(kk, v, 0); err != nil {
						return err
					}
				}
				n++
			}
		}
		m["get.ops"] = float64(n) / time.Since(start).Seconds()

		count := 0
		var prev []byte
		start = time.Now()
		err = r.scan(func(k, v []byte) error {
			if count > 0 && bytes.Compare(prev, k) >= 0 {
				return fmt.Errorf("scan: %x after %x", k, prev)
			}
			prev = append(prev[:0], k...)
			count++
			return dataset.CheckAt(k, v, 0)
		})
		if err != nil {
			return err
		}
		if count != t.Keys {
			return fmt.Errorf("scan: %d keys, want %d", count, t.Keys)
		}
		m["scan.s"] = time.Since(start).Seconds()
	}
	if err := r.close(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// majorFaults returns the process's major page faults so far (pages read
// from the disk).
func majorFaults() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Majflt)
}

// procStatus returns a size field of /proc/self/status in bytes.
func procStatus(name string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}
