package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/bench/internal/pagecache"

	"golang.org/x/sys/unix"
)

// task is one child's job.
type task struct {
	Name   string        `json:"name"` // reopen, read or oneshot
	Engine string        `json:"engine"`
	Dir    string        `json:"dir"`
	Keys   int           `json:"keys"`
	Cold   string        `json:"cold,omitempty"`    // reopen: empty the page cache first, by this method
	GetDur time.Duration `json:"get_dur,omitempty"` // read: how long the timed Gets run
	Key    int           `json:"key,omitempty"`     // oneshot: the index of the key to read
	// Slices: read takes its timed Gets in slices its parent asks for
	// on stdin (serveSlices), rather than GetDur of them at once.
	Slices bool `json:"slices,omitempty"`
}

// metrics are a child's figures by name.
type metrics map[string]float64

// runChild runs the task encoded in arg and prints its figures as JSON
// (a oneshot child prints nothing: its parent times the whole process).
func runChild(arg string) error {
	var t task
	if err := json.Unmarshal([]byte(arg), &t); err != nil {
		return fmt.Errorf("child task: %w", err)
	}
	var m metrics
	var err error
	switch t.Name {
	case "reopen":
		m, err = childReopen(&t)
	case "read":
		m, err = childRead(&t)
	case "oneshot":
		return childOneshot(&t)
	default:
		err = fmt.Errorf("unknown child task %q", t.Name)
	}
	if err != nil {
		return fmt.Errorf("%s on %s: %w", t.Name, t.Engine, err)
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// childReopen opens the store in a process that has not touched it (its
// files in the page cache, or evicted first when t.Cold is set), then
// gets one key. It reports the open's time, the process's resident set
// and Go heap after it, and the first Get's time, major page faults and
// bytes read from the disk.
func childReopen(t *task) (metrics, error) {
	if t.Cold != "" {
		if err := pagecache.Make(t.Cold, t.Dir); err != nil {
			return nil, err
		}
	}
	m := metrics{}
	rss0 := procStatus("VmRSS")
	flt0, rd0 := majorFaults(), readBytes()
	start := time.Now()
	s, err := open(t.Engine, t.Dir, false)
	if err != nil {
		return nil, err
	}
	m["open.s"] = time.Since(start).Seconds()
	m["open.majflt"] = majorFaults() - flt0
	m["open.read"] = readBytes() - rd0
	m["open.rss"] = procStatus("VmRSS")
	m["open.rssadded"] = m["open.rss"] - rss0
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m["open.heap"] = float64(ms.HeapInuse)

	var k [keySize]byte
	key := dataset.Key(k[:], randomKey(0, t.Keys))
	flt0, rd0 = majorFaults(), readBytes()
	start = time.Now()
	v, err := s.get(key)
	if err == nil {
		m["get1.s"] = time.Since(start).Seconds()
		m["get1.majflt"] = majorFaults() - flt0
		m["get1.read"] = readBytes() - rd0
		err = dataset.CheckAt(key, v, 0)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return m, s.close()
}

// childRead opens the store (its files in the page cache) and runs
// random Gets on one goroutine for t.GetDur after an untimed warm-up of
// half that, every 64th value checked (with t.Slices, in the slices its
// parent asks for: serveSlices); then a full scan in key order, every
// pair checked, in order, each key once; then the heap in use after a
// GC: what the store keeps once it has served reads.
func childRead(t *task) (metrics, error) {
	s, err := open(t.Engine, t.Dir, false)
	if err != nil {
		return nil, err
	}
	m, err := readStore(s, t)
	if cerr := s.close(); err == nil {
		err = cerr
	}
	return m, err
}

func readStore(s store, t *task) (metrics, error) {
	m := metrics{}
	var k [keySize]byte
	n := 0
	gets := func(get func([]byte) ([]byte, error), d time.Duration) (int, error) {
		start := time.Now()
		done := 0
		for time.Since(start) < d {
			for range 1000 {
				key := dataset.Key(k[:], randomKey(n, t.Keys))
				v, err := get(key)
				if err == nil && n%64 == 0 {
					err = dataset.CheckAt(key, v, 0)
				}
				if err != nil {
					return done, err
				}
				n++
				done++
			}
		}
		return done, nil
	}
	if _, err := gets(s.get, t.GetDur/2); err != nil {
		return nil, err
	}
	// kv's Get, whose entries the caller keeps: a copy of its own each.
	var owned func([]byte) ([]byte, error)
	if o, ok := s.(interface{ getOwned([]byte) ([]byte, error) }); ok {
		owned = o.getOwned
	}
	var start time.Time
	if t.Slices {
		if err := serveSlices(os.Stdin, os.Stdout, s.get, owned, gets); err != nil {
			return nil, err
		}
	} else {
		start = time.Now()
		done, err := gets(s.get, t.GetDur)
		if err != nil {
			return nil, err
		}
		m["get.ops"] = float64(done) / time.Since(start).Seconds()
		if owned != nil {
			start = time.Now()
			if done, err = gets(owned, t.GetDur); err != nil {
				return nil, err
			}
			m["getowned.ops"] = float64(done) / time.Since(start).Seconds()
		}
	}

	for _, sc := range []struct {
		id   string
		scan func(func(k, v []byte) error) error
	}{{"scan.kps", s.scan}, {"scanview.kps", s.scanView}} {
		count := 0
		var prev []byte
		start = time.Now()
		err := sc.scan(func(k, v []byte) error {
			if count > 0 && bytes.Compare(prev, k) >= 0 {
				return fmt.Errorf("%s: %x after %x", sc.id, k, prev)
			}
			prev = append(prev[:0], k...)
			count++
			return dataset.CheckAt(k, v, 0)
		})
		if err != nil {
			return nil, err
		}
		if count != t.Keys {
			return nil, fmt.Errorf("%s: %d keys, want %d", sc.id, count, t.Keys)
		}
		m[sc.id] = float64(count) / time.Since(start).Seconds()
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m["heap"] = float64(ms.HeapInuse)
	m["rss"] = procStatus("VmRSS")
	return m, nil
}

// serveSlices answers its parent's requests for timed Gets, one a line
// on in: "get NS" (through get) or "owned NS" (through owned, kv's Get
// whose entries are the caller's), each run for NS nanoseconds, each
// answered on out by a line "GETS SECONDS". It says "ready" first, and
// returns at the end of in. Slices of the engines' children, taken in
// turn, meet the same machine: a neighbour's burst slows every engine
// a little, not one engine's whole figure.
func serveSlices(in io.Reader, out io.Writer, get, owned func([]byte) ([]byte, error), gets func(func([]byte) ([]byte, error), time.Duration) (int, error)) error {
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		kind, ns, ok := strings.Cut(sc.Text(), " ")
		d, err := strconv.ParseInt(ns, 10, 64)
		fn := get
		if kind == "owned" {
			fn = owned
		}
		if !ok || err != nil || d <= 0 || (kind != "get" && kind != "owned") || fn == nil {
			return fmt.Errorf("slice request %q: want \"get NS\" or \"owned NS\" (owned of kv only)", sc.Text())
		}
		start := time.Now()
		done, err := gets(fn, time.Duration(d))
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "%d %g\n", done, time.Since(start).Seconds()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// childOneshot is the smallest program that reads one key: open
// read-only, one Get, check it, close. Its parent times the process.
func childOneshot(t *task) error {
	s, err := open(t.Engine, t.Dir, true)
	if err != nil {
		return err
	}
	var k [keySize]byte
	key := dataset.Key(k[:], t.Key)
	v, err := s.get(key)
	if err == nil {
		err = dataset.CheckAt(key, v, 0)
	}
	if cerr := s.close(); err == nil {
		err = cerr
	}
	return err
}

// majorFaults returns the process's major page faults so far: pages of a
// mapping read from the disk (not reads by read(2), which readBytes
// counts with them).
func majorFaults() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Majflt)
}

// readBytes returns the bytes this process has caused to be read from
// the disk so far (read_bytes of /proc/self/io: reads and page faults
// alike, read-ahead included), or 0 where the kernel does not count them.
func readBytes() float64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "read_bytes:"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return n
		}
	}
	return 0
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
