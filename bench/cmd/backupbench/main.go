// Command backupbench measures kv's online backup (Store.Backup, as
// kv DIR backup FILE publishes it) on a store of 1M keys: its throughput
// against the disk's sequential write speed, measured in the same round
// with the same bytes, and what it does to durable writers' latency,
// against no background work and against back-to-back checkpoints, the
// other job that writes the whole map while writers go on.
//
//	go run ./cmd/backupbench                        # 3 rounds, 1M keys
//	go run ./cmd/backupbench -out results/NAME.md   # a results file: the run (date, commit, command, machine, load) and the tables
//	go run ./cmd/backupbench -short                 # 20k keys, 1 round: a smoke test
//
// Each round, in an order that alternates by round:
//
//   - seqwrite: the bytes of one backup written to a new file in 256 KiB
//     writes (the backup's buffer), fdatasync'ed, renamed and the
//     directory fsync'ed: what the disk gives a writer that has its
//     bytes ready.
//   - backup: Store.Backup published to a file the same way
//     (vfs.Publish), on the idle store; read back and verified after the
//     timing (every checksum, the key count, the revision). The
//     backups of the latency phase are not read back.
//   - backup to io.Discard: the encoding alone.
//
// Then, each for -dur, in an order rotated by round, -writers goroutines
// each Put an existing key (durable, group commit) in a loop while, in
// the background, nothing runs (none), backups are published back to back
// (backup), backups are written to io.Discard back to back (discard: the
// backup's cost without its disk writes), or Checkpoint runs back to back
// (checkpoint); every Put's latency is recorded. Ratios are taken within a round: the machine is
// shared and its load is in the results file.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvstore/kv/bench/internal/runinfo"
	"github.com/kvstore/kv/bench/internal/units"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "keys in the store (16-byte keys, 100-byte values)")
	writers := flag.Int("writers", 16, "concurrent durable writers during the latency phases")
	dur := flag.Duration("dur", 3*time.Second, "length of each latency phase")
	rounds := flag.Int("rounds", 3, "rounds")
	dir := flag.String("dir", "", "directory for the store and the files (default: a new temporary one, removed at the end)")
	out := flag.String("out", "", "also write the report, headed by the run's date, commit, command, machine and load, to this file")
	short := flag.Bool("short", false, "20k keys, 1 round, 0.5 s phases: a smoke test")
	flag.Parse()
	if *short {
		*keys, *rounds, *dur = 20_000, 1, 500*time.Millisecond
	}
	if err := run(config{keys: *keys, writers: *writers, dur: *dur, rounds: *rounds, dir: *dir, out: *out}); err != nil {
		fmt.Fprintln(os.Stderr, "backupbench:", err)
		os.Exit(1)
	}
}

type config struct {
	keys, writers, rounds int
	dur                   time.Duration
	dir, out              string
}

// round holds one round's figures by row id.
type round map[string]float64

const (
	keySize   = 16
	valueSize = 100
	// bufSize is the buffer Backup and vfs.Publish write through.
	bufSize = 256 << 10
)

// splitmix64 scatters consecutive inputs (as kvbench's keys do).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func dataKey(i int) []byte {
	k := make([]byte, keySize)
	binary.BigEndian.PutUint64(k[0:], splitmix64(uint64(i)))
	binary.BigEndian.PutUint64(k[8:], splitmix64(uint64(i)^0x5bd1e995))
	return k
}

func value(i, gen int) []byte {
	v := make([]byte, valueSize)
	n := copy(v, fmt.Sprintf("%d/%d/", i, gen))
	for j := n; j < valueSize; j++ {
		v[j] = byte('a' + j%26)
	}
	return v
}

func run(cfg config) error {
	base := cfg.dir
	if base == "" {
		d, err := os.MkdirTemp("", "backupbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		base = d
	}
	info := runinfo.Collect("./cmd/backupbench", base)
	s, err := kv.Open(filepath.Join(base, "kv"), nil)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(os.Stderr, "loading %d keys\n", cfg.keys)
	if err := load(s, cfg.keys); err != nil {
		return err
	}
	var rs []round
	var loads []string
	for r := range cfg.rounds {
		loads = append(loads, loadAvg())
		fmt.Fprintf(os.Stderr, "round %d of %d (load %s)\n", r+1, cfg.rounds, loads[r])
		rd, err := oneRound(s, base, cfg, r)
		if err != nil {
			return err
		}
		rs = append(rs, rd)
	}
	if n := s.Len(); n != cfg.keys {
		return fmt.Errorf("the store holds %d keys after the run, want %d: the writers only overwrite", n, cfg.keys)
	}
	var b strings.Builder
	report(&b, rs, cfg)
	fmt.Print(b.String())
	if cfg.out == "" {
		return nil
	}
	head := fmt.Sprintf("# backupbench results\n\n%s- load: the machine's 1-minute load average (`/proc/loadavg`) before each round: %s\n\n",
		info.Markdown(), strings.Join(loads, ", "))
	return os.WriteFile(cfg.out, []byte(head+b.String()), 0o644)
}

// load puts n keys in durable batches of 1,000 and checkpoints, so that
// the log does not hold the load.
func load(s *kv.Store, n int) error {
	for i := 0; i < n; i += 1000 {
		var ops []kv.Op
		for j := i; j < min(i+1000, n); j++ {
			ops = append(ops, kv.PutOp(dataKey(j), value(j, 0)))
		}
		if _, err := s.Txn(kv.Txn{Then: ops}); err != nil {
			return err
		}
	}
	return s.Checkpoint()
}

func oneRound(s *kv.Store, base string, cfg config, r int) (round, error) {
	rd := round{}
	size, err := backupSize(s)
	if err != nil {
		return nil, err
	}
	rd["backup.bytes"] = float64(size)
	steps := []func() error{
		func() error {
			t, err := seqWrite(base, size)
			rd["seqwrite.mbs"] = float64(size) / t / 1e6
			return err
		},
		func() error {
			t, err := backupFile(s, base, cfg.keys, true)
			rd["backup.mbs"] = float64(size) / t / 1e6
			return err
		},
	}
	if r%2 == 1 {
		slices.Reverse(steps)
	}
	for _, st := range steps {
		if err := st(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if _, err := s.Backup(io.Discard); err != nil {
		return nil, err
	}
	rd["backup.discard.mbs"] = float64(size) / time.Since(start).Seconds() / 1e6

	phases := []string{"none", "backup", "discard", "checkpoint"}
	for range r % len(phases) {
		phases = append(phases[1:], phases[0])
	}
	for _, ph := range phases {
		lat, bg, err := writePhase(s, base, cfg, ph, r)
		if err != nil {
			return nil, err
		}
		slices.Sort(lat)
		q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))].Seconds() }
		rd["put.p50."+ph] = q(0.50)
		rd["put.p99."+ph] = q(0.99)
		rd["put.max."+ph] = lat[len(lat)-1].Seconds()
		rd["put.ops."+ph] = float64(len(lat)) / cfg.dur.Seconds()
		rd["bg."+ph] = float64(bg)
	}
	return rd, nil
}

// backupSize returns the bytes of a backup of s.
func backupSize(s *kv.Store) (int64, error) {
	cw := &countWriter{w: io.Discard}
	_, err := s.Backup(cw)
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// seqWrite writes size bytes to a new file as vfs.Publish writes a
// backup (256 KiB at a time, then fdatasync, rename, directory fsync)
// and returns the seconds it took.
func seqWrite(dir string, size int64) (float64, error) {
	buf := make([]byte, bufSize)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9) // not zeros: nothing below may skip them
	}
	start := time.Now()
	err := vfs.Publish(vfs.OS, dir, "seqwrite", func(w io.Writer) error {
		for left := size; left > 0; {
			n := min(left, int64(len(buf)))
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			left -= n
		}
		return nil
	})
	t := time.Since(start).Seconds()
	if err != nil {
		return 0, err
	}
	return t, os.Remove(filepath.Join(dir, "seqwrite"))
}

// backupFile publishes a backup of s to a file, as kv DIR backup FILE
// does, and returns the seconds it took; then, untimed and only with
// verify, it reads the file back (every checksum, the key count, the
// revision Backup returned); it removes it.
func backupFile(s *kv.Store, dir string, keys int, verify bool) (float64, error) {
	name := filepath.Join(dir, "backup")
	var rev kv.Revision
	start := time.Now()
	err := vfs.Publish(vfs.OS, dir, "backup", func(w io.Writer) error {
		var err error
		rev, err = s.Backup(w)
		return err
	})
	t := time.Since(start).Seconds()
	if err != nil {
		return 0, err
	}
	if verify {
		if err := verifyBackup(name, rev, keys); err != nil {
			return 0, err
		}
	}
	return t, os.Remove(name)
}

// verifyBackup reads the backup in name back: every checksum, its
// revision and its number of keys.
func verifyBackup(name string, rev kv.Revision, keys int) error {
	d, err := kv.ReadBackup(name, nil, nil)
	if err != nil {
		return err
	}
	if d.Revision != rev || d.Keys != int64(keys) {
		return fmt.Errorf("backup %s holds revision %d and %d keys, want %d and %d", name, d.Revision, d.Keys, rev, keys)
	}
	return nil
}

// writePhase runs the writers for cfg.dur with phase's background job,
// and returns every Put's latency and how many background jobs completed.
func writePhase(s *kv.Store, base string, cfg config, phase string, r int) ([]time.Duration, int, error) {
	var stop atomic.Bool
	var bgDone int
	var bgErr error
	bgFinished := make(chan struct{})
	go func() {
		defer close(bgFinished)
		for !stop.Load() {
			switch phase {
			case "none":
				time.Sleep(time.Millisecond)
				continue
			case "backup":
				// Not read back: the writers see the backup's own cost.
				_, bgErr = backupFile(s, base, cfg.keys, false)
			case "discard":
				_, bgErr = s.Backup(io.Discard)
			case "checkpoint":
				bgErr = s.Checkpoint()
			}
			if bgErr != nil {
				return
			}
			bgDone++
		}
	}()
	lats := make([][]time.Duration, cfg.writers)
	errs := make([]error, cfg.writers)
	var wg sync.WaitGroup
	for w := range cfg.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), uint64(w)))
			for gen := 1; !stop.Load(); gen++ {
				i := rng.IntN(cfg.keys)
				t0 := time.Now()
				if _, err := s.Put(dataKey(i), value(i, gen)); err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	time.Sleep(cfg.dur)
	stop.Store(true)
	wg.Wait()
	<-bgFinished
	var all []time.Duration
	for w := range lats {
		if errs[w] != nil {
			return nil, 0, errs[w]
		}
		all = append(all, lats[w]...)
	}
	if bgErr != nil {
		return nil, 0, fmt.Errorf("%s phase: %w", phase, bgErr)
	}
	if len(all) == 0 {
		return nil, 0, fmt.Errorf("%s phase: no write completed", phase)
	}
	return all, bgDone, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// stats returns the median, minimum and maximum of id over the rounds.
func stats(rs []round, f func(round) float64) (float64, float64, float64) {
	var v []float64
	for _, r := range rs {
		v = append(v, f(r))
	}
	slices.Sort(v)
	return v[len(v)/2], v[0], v[len(v)-1]
}

func report(w io.Writer, rs []round, cfg config) {
	fmt.Fprintf(w, "## Backup of %d keys (16-byte keys, 100-byte values): %d round(s); %d durable writers, %v per latency phase\n\n",
		cfg.keys, len(rs), cfg.writers, cfg.dur)
	fmt.Fprintln(w, "Figures, the median of the rounds and their range:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | median | range | what |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fig := func(id, what string, f func(float64) string) {
		m, lo, hi := stats(rs, func(r round) float64 { return r[id] })
		fmt.Fprintf(w, "| %s | %s | %s–%s | %s |\n", id, f(m), strings.TrimSuffix(f(lo), unit(f(lo))), f(hi), what)
	}
	fig("backup.bytes", "size of one backup", units.MiB)
	fig("seqwrite.mbs", "sequential write of those bytes, 256 KiB at a time, fdatasync, rename, directory fsync", mbs)
	fig("backup.mbs", "Store.Backup published to a file the same way, idle store", mbs)
	fig("backup.discard.mbs", "Store.Backup to io.Discard: the encoding alone", mbs)
	for _, ph := range []string{"none", "backup", "discard", "checkpoint"} {
		bg := map[string]string{"none": "nothing in the background", "backup": "backups published back to back",
			"discard": "backups to io.Discard back to back", "checkpoint": "Checkpoint back to back"}[ph]
		fig("put.ops."+ph, "durable Puts per second, "+bg, opsf)
		fig("put.p50."+ph, "Put latency p50, "+bg, ms)
		fig("put.p99."+ph, "Put latency p99, "+bg, ms)
		fig("put.max."+ph, "Put latency, the longest, "+bg, ms)
		if ph != "none" {
			fig("bg."+ph, "background jobs completed in the phase", units.Count)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios, taken within each round: the median of the rounds and their range:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ratio | median | range | what |")
	fmt.Fprintln(w, "|---|---|---|---|")
	ratio := func(id, a, b, what string) {
		m, lo, hi := stats(rs, func(r round) float64 { return r[a] / r[b] })
		fmt.Fprintf(w, "| %s | %s | %s–%s | %s |\n", id, x(m), x(lo), x(hi), what)
	}
	ratio("backup.vs.seqwrite", "backup.mbs", "seqwrite.mbs", "backup throughput ÷ the disk's sequential write of the same bytes")
	ratio("p99.backup.vs.none", "put.p99.backup", "put.p99.none", "writers' p99 with backups running ÷ with nothing in the background")
	ratio("p99.discard.vs.none", "put.p99.discard", "put.p99.none", "writers' p99 with backups to io.Discard running (no disk) ÷ with nothing in the background")
	ratio("p99.checkpoint.vs.none", "put.p99.checkpoint", "put.p99.none", "writers' p99 with checkpoints running ÷ with nothing in the background")
	ratio("p99.backup.vs.checkpoint", "put.p99.backup", "put.p99.checkpoint", "writers' p99 with backups running ÷ with checkpoints running")
	ratio("p50.backup.vs.none", "put.p50.backup", "put.p50.none", "writers' p50 with backups running ÷ with nothing in the background")
	ratio("ops.backup.vs.none", "put.ops.backup", "put.ops.none", "durable Puts per second with backups running ÷ with nothing in the background")
}

func unit(s string) string {
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		return s[i:]
	}
	return ""
}

func x(v float64) string {
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 1, 64) + "×"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}

func mbs(v float64) string  { return fmt.Sprintf("%.0f MB/s", v) }
func ms(v float64) string   { return fmt.Sprintf("%.2f ms", v*1e3) }
func opsf(v float64) string { return fmt.Sprintf("%.0f", v) }
