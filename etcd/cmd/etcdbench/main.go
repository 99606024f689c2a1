// Command etcdbench measures what moving past one machine costs: the
// same workloads, through the same API, on the embedded store and on a
// 3-member etcd cluster on this machine's loopback, in the same run, as
// ratios taken within each round.
//
//	cd etcd
//	go run ./cmd/etcdbench -short                                         # a smoke test: 1 round of 300 ms runs
//	go run ./cmd/etcdbench -out ../bench/results/NAME-etcdbench.md        # a results file: 5 rounds of 3 s runs
//
// The workloads, each run on both backends one after the other (the
// order alternating from round to round):
//
//   - durable puts at 1, 16 and 64 clients (goroutines), each putting
//     100-byte values to 8 keys of its own in turn through kvapi.Put:
//     on the embedded store (kv.Open's default options, every write
//     fdatasynced before it returns, through kvapi.Local) and on the
//     cluster (etcdkv, every write committed by a majority, each member
//     fsyncing its log);
//   - lock acquire+release cycles of one lock, by 1 client and by 16
//     clients contending, each client with a Locker of its own: on the
//     embedded store filelock.New on the open store, on the cluster
//     etcdlock.NewLocker (the Lease strategy).
//
// Every run checks what it gets back and the benchmark fails on the
// first wrong answer: each put client's revisions strictly increase and
// each key it wrote reads back its last value at the revision that put
// returned; no two lock holders overlap and every token is larger than
// the one before. No timing is asserted.
//
// The cluster's members are processes of their own (command
// etcdmember, built at the start), each with its data directory on the
// file system of -dir, like the embedded store: the three members and
// the store share this machine's disk and cores. The figures say what
// the protocol costs on one machine (a majority's fsyncs, the network
// stack on loopback, gRPC), not what a cluster of three machines on a
// network would do.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/etcd/etcdkv"
	"github.com/kvstore/kv/etcd/etcdlock"
	"github.com/kvstore/kv/etcd/internal/cluster"
	"github.com/kvstore/kv/etcd/internal/runinfo"
	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

func main() {
	var cfg config
	clients := flag.String("clients", "1,16,64", "client counts of the put workload")
	flag.IntVar(&cfg.lockClients, "lock-clients", 16, "clients of the contended lock workload")
	flag.IntVar(&cfg.rounds, "rounds", 5, "rounds, each running every workload on both backends")
	flag.DurationVar(&cfg.dur, "dur", 3*time.Second, "how long each timed run lasts")
	flag.StringVar(&cfg.dir, "dir", "", "where the store and the members' data go (default: a new temporary directory, removed at the end)")
	out := flag.String("out", "", "also write the report, headed by the run's date, commit, command and machine, to this file: a results file")
	short := flag.Bool("short", false, "a smoke test: 1 round of 300 ms runs")
	flag.Parse()
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "etcdbench: -clients: %q is not a client count\n", s)
			os.Exit(2)
		}
		cfg.putClients = append(cfg.putClients, n)
	}
	if *short {
		cfg.rounds, cfg.dur = 1, 300*time.Millisecond
	}
	if err := run(cfg, *out); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		os.Exit(1)
	}
}

type config struct {
	putClients  []int
	lockClients int
	rounds      int
	dur         time.Duration
	dir         string
}

// backend is one side of the comparison.
type backend struct {
	name      string
	db        kvapi.KV
	newLocker func() (*filelock.Locker, error)
}

// The backends' names, as the figures' keys and the report's columns.
const (
	embedded = "embedded"
	etcd     = "etcd"
)

// workload is one row group of the report, run on each backend.
type workload struct {
	id      string // put16, lock1, ...
	clients int
	run     func(ctx context.Context, b backend, prefix string) (result, error)
}

// round holds one round's figures: "ID.FIGURE/BACKEND" → value (seconds
// for times, operations per second for throughputs).
type round map[string]float64

// stepTimeout bounds one timed run beyond its duration: a cluster that
// stops answering fails the benchmark instead of hanging it.
const stepTimeout = 2 * time.Minute

func run(cfg config, out string) error {
	base := cfg.dir
	if base == "" {
		d, err := os.MkdirTemp("", "etcdbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		base = d
	}
	// The run is described as it starts: the commit is the code that ran.
	info := runinfo.Collect("./cmd/etcdbench", base)
	fmt.Fprintln(os.Stderr, "building etcdmember")
	bin, err := cluster.BuildMember(base)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c, err := cluster.Start(sctx, cluster.Config{Bin: bin, Dir: filepath.Join(base, "etcd")})
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	cli, err := c.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	vctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	st, err := cli.Status(vctx, c.Members[0].ClientURL)
	cancel()
	if err != nil {
		return err
	}
	etcdB := backend{
		name: etcd,
		db:   etcdkv.New(cli, nil),
		newLocker: func() (*filelock.Locker, error) {
			return etcdlock.NewLocker(cli, nil)
		},
	}

	var works []workload
	for _, n := range cfg.putClients {
		works = append(works, workload{fmt.Sprintf("put%d", n), n, func(ctx context.Context, b backend, prefix string) (result, error) {
			return puts(ctx, b.db, prefix, n, cfg.dur)
		}})
	}
	for _, n := range []int{1, cfg.lockClients} {
		works = append(works, workload{fmt.Sprintf("lock%d", n), n, func(ctx context.Context, b backend, prefix string) (result, error) {
			return lockCycles(ctx, b.newLocker, prefix, n, cfg.dur)
		}})
	}

	var rounds []round
	var loads []float64
	for r := range cfg.rounds {
		// A new store each round, as the cluster's keys of each round
		// are new: neither side carries a larger data set than the
		// other into a round.
		s, err := kv.Open(filepath.Join(base, fmt.Sprintf("kv-r%d", r)), nil)
		if err != nil {
			return err
		}
		embB := backend{
			name:      embedded,
			db:        kvapi.Local(s),
			newLocker: func() (*filelock.Locker, error) { return filelock.New(s) },
		}
		order := []backend{embB, etcdB}
		if r%2 == 1 {
			order = []backend{etcdB, embB}
		}
		rd := round{}
		for _, w := range works {
			for _, b := range order {
				loads = append(loads, loadAvg())
				fmt.Fprintf(os.Stderr, "round %d of %d: %s on %s\n", r+1, cfg.rounds, w.id, b.name)
				ctx, cancel := context.WithTimeout(context.Background(), cfg.dur+stepTimeout)
				res, err := w.run(ctx, b, fmt.Sprintf("etcdbench-r%d-%s", r, w.id))
				cancel()
				if err != nil {
					s.Close()
					return fmt.Errorf("round %d, %s on %s: %w", r+1, w.id, b.name, err)
				}
				record(rd, w.id, b.name, res)
			}
		}
		if err := s.Close(); err != nil {
			return err
		}
		rounds = append(rounds, rd)
	}
	h := header{
		info:   info,
		cfg:    cfg,
		etcdV:  st.Version,
		loads:  loads,
		rounds: len(rounds),
	}
	report(os.Stdout, h, works, rounds)
	if out == "" {
		return nil
	}
	var b strings.Builder
	report(&b, h, works, rounds)
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// record keeps a run's figures: for puts the throughput and the p50
// and p99 latencies, for lock cycles the wall time per cycle and the
// p99 latency.
func record(rd round, id, b string, r result) {
	if strings.HasPrefix(id, "put") {
		rd[id+".ops/"+b] = r.perSec()
		rd[id+".p50/"+b] = r.pct(0.50).Seconds()
		rd[id+".p99/"+b] = r.pct(0.99).Seconds()
		return
	}
	rd[id+".cycle/"+b] = r.perOp().Seconds()
	rd[id+".p99/"+b] = r.pct(0.99).Seconds()
}

// loadAvg is the machine's 1-minute load average, or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

type header struct {
	info   runinfo.Info
	cfg    config
	etcdV  string
	loads  []float64
	rounds int
}

// row is a line of the report: a figure of a workload on both backends.
type row struct {
	id, label string
	higher    bool // a throughput: higher is better
}

func rows(works []workload) []row {
	var out []row
	for _, w := range works {
		if strings.HasPrefix(w.id, "put") {
			n := plural(w.clients, "client")
			out = append(out,
				row{w.id + ".ops", "durable puts, " + n + ": ops/s ↑", true},
				row{w.id + ".p50", "durable puts, " + n + ": p50 ↓", false},
				row{w.id + ".p99", "durable puts, " + n + ": p99 ↓", false})
			continue
		}
		if w.clients == 1 {
			out = append(out,
				row{w.id + ".cycle", "lock acquire+release, 1 client: time per cycle ↓", false},
				row{w.id + ".p99", "lock acquire+release, 1 client: p99 ↓", false})
			continue
		}
		n := plural(w.clients, "client")
		out = append(out,
			row{w.id + ".cycle", "lock acquire+release, " + n + " contending for one lock: wall time ÷ cycles ↓", false},
			row{w.id + ".p99", "lock acquire+release, " + n + " contending: p99, the wait included ↓", false})
	}
	return out
}

func plural(n int, s string) string {
	if n == 1 {
		return "1 " + s
	}
	return fmt.Sprintf("%d %ss", n, s)
}

// report writes the results: the run, then the figures and etcd's
// per-round cost relative to the embedded store.
func report(w io.Writer, h header, works []workload, rounds []round) {
	fmt.Fprintf(w, "# etcdbench results\n\n%s", h.info.Markdown())
	fmt.Fprintf(w, "- cluster: 3 members of etcd %s (go.etcd.io/etcd/server/v3 embed, command etcdmember), processes of their own on 127.0.0.1, heartbeat 50 ms, election timeout 500 ms, each fsyncing its log on the file system above; one client (go.etcd.io/etcd/client/v3) with the three endpoints, shared by every goroutine\n", h.etcdV)
	fmt.Fprintln(w, "- embedded: kv.Open's default options (every write fdatasynced before it returns), a new store each round, through kvapi.Local; the same file system")
	fmt.Fprintln(w, "- puts: each client a goroutine putting 100-byte values to 8 keys of its own in turn through kvapi.Put, one after another; its revisions checked to increase, every key read back after the run")
	fmt.Fprintln(w, "- locks: each client a goroutine with a Locker of its own (embedded: filelock.New on the store, its default strategy; etcd: etcdlock.NewLocker, the Lease strategy, TTL 10 s) acquiring and releasing one lock; no two holders at once and increasing tokens checked")
	fmt.Fprintf(w, "- rounds: %d; each run lasts %v; each workload runs on both backends in turn, the embedded store first in odd rounds, etcd first in even ones\n", h.rounds, h.cfg.dur)
	if m, lo, hi, ok := spread(h.loads); ok {
		fmt.Fprintf(w, "- load: the machine's 1-minute load average (`/proc/loadavg`) before each of the run's %d steps: median %.1f (%.1f–%.1f). This machine is shared, and the figures move widely from round to round: read the ratios, taken within a round\n", len(h.loads), m, lo, hi)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "## The embedded store and a 3-member etcd cluster on one machine\n\n")
	fmt.Fprintln(w, "Median (min–max) over the rounds; ↑ higher is better, ↓ lower is better. The cost of etcd is its figure's ratio to the embedded store's within each round, as times slower: the embedded store's ops/s ÷ etcd's, etcd's time ÷ the embedded store's; its median and range over the rounds.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | workload | embedded | etcd | cost of etcd (median, range) |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows(works) {
		var emb, et, ratio []float64
		for _, rd := range rounds {
			a, b := rd[r.id+"/"+embedded], rd[r.id+"/"+etcd]
			emb, et = append(emb, a), append(et, b)
			if r.higher {
				ratio = append(ratio, a/b)
			} else {
				ratio = append(ratio, b/a)
			}
		}
		format := dur
		if r.higher {
			format = ops
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.id, r.label, cell(emb, format), cell(et, format), ratioCell(ratio))
	}
}

// spread returns the median, minimum and maximum of v.
func spread(v []float64) (med, lo, hi float64, ok bool) {
	if len(v) == 0 {
		return 0, 0, 0, false
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2], s[0], s[len(s)-1], true
}

// cell is "median (min–max)" of v, one value alone when there is one.
func cell(v []float64, f func(float64) string) string {
	m, lo, hi, _ := spread(v)
	if len(v) == 1 {
		return f(m)
	}
	return fmt.Sprintf("%s (%s–%s)", f(m), f(lo), f(hi))
}

// ops formats a throughput in operations per second.
func ops(v float64) string {
	switch {
	case v < 1000:
		return fmt.Sprintf("%.0f", v)
	case v < 10_000:
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0fk", v/1000)
}

// dur formats seconds.
func dur(s float64) string {
	switch d := time.Duration(s * 1e9); {
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2f µs", s*1e6)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", s*1e3)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", s*1e3)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

// ratioCell is "median× (min–max×)" of ratios, one ratio alone when
// there is one.
func ratioCell(v []float64) string {
	m, lo, hi, _ := spread(v)
	if len(v) == 1 {
		return fmt.Sprintf("%.1f×", m)
	}
	return fmt.Sprintf("%.1f× (%.1f–%.1f×)", m, lo, hi)
}
