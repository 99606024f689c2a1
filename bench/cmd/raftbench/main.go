// Command raftbench runs github.com/hashicorp/raft/bench's functions on
// each store and measures a 3-node hashicorp/raft cluster (v1.7.2, its
// in-memory transport) on two log and stable stores: kvraft (a kv data
// directory per node) and raft-boltdb v2 (v2.3.1, a bbolt file per node).
//
//	cd bench
//	go run ./cmd/raftbench -short                          # a smoke test, a few seconds
//	go run ./cmd/raftbench -out results/NAME-raft.md       # the full run
//
// Each round runs raft/bench's functions (StoreLogs, StoreLog, GetLog,
// FirstIndex, LastIndex, DeleteRange, Set, SetUint64, Get, GetUint64),
// each on a new store, for 300 ms each (testing.Benchmark), and then, on
// each store in turn (kvraft first in odd rounds,
// raft-boltdb first in even ones), a new cluster in new directories:
// committed commands per second with 1 and with 16 concurrent appliers
// at the leader, each applier waiting for its command to be committed
// and applied, and the p50 and p99 of that wait; then, in the first
// round, the disk space of the stores' directories after -n commands, a
// Raft snapshot on every node and the compaction that follows it. Every
// FSM is checked to have applied every command once. The report has the
// medians and ranges of each figure and of its ratio kvraft ÷ raft-boltdb
// within a round.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftbench "github.com/hashicorp/raft/bench"
	"github.com/kvstore/kv/kvraft"
)

type options struct {
	short    bool
	rounds   int
	dur      time.Duration
	n        int // commands before the disk measurement
	cmdBytes int
	out      string
	dir      string
}

func main() {
	testing.Init() // testing.Benchmark reads -test.benchtime
	var o options
	flag.BoolVar(&o.short, "short", false, "a smoke test: 1 round of 0.5 s runs and 5,000 commands for the disk figure")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds")
	flag.DurationVar(&o.dur, "dur", 5*time.Second, "length of each throughput run")
	flag.IntVar(&o.n, "n", 1_000_000, "commands applied before the disk measurement (first round only)")
	flag.IntVar(&o.cmdBytes, "cmd-bytes", 64, "bytes per command")
	flag.StringVar(&o.out, "out", "", "also write the report to this file")
	flag.StringVar(&o.dir, "dir", "", "directory for the stores (default: a new one under the temporary directory)")
	flag.Parse()
	benchtime := "300ms"
	if o.short {
		o.rounds, o.dur, o.n = 1, 500*time.Millisecond, 5000
		benchtime = "20x"
	}
	flag.Set("test.benchtime", benchtime)
	report, err := run(o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftbench:", err)
		os.Exit(1)
	}
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "raftbench:", err)
			os.Exit(1)
		}
	}
}

// engine opens node i's store in dir.
type engine struct {
	name string
	open func(dir string) (store, error)
}

type store interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

var engines = []engine{
	{"kvraft", func(dir string) (store, error) { return kvraft.Open(dir, nil) }},
	{"raft-boltdb", func(dir string) (store, error) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	}},
}

// fsm counts the commands it applies and checks each id once.
type fsm struct {
	mu      sync.Mutex
	applied uint64
	seen    map[uint64]bool
	dups    int
}

func (f *fsm) Apply(l *raft.Log) any {
	if len(l.Data) < 8 {
		return errors.New("short command")
	}
	id := binary.LittleEndian.Uint64(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied++
	if f.seen[id] {
		f.dups++
	}
	f.seen[id] = true
	return nil
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return snap(binary.LittleEndian.AppendUint64(nil, f.applied)), nil
}

func (f *fsm) Restore(r io.ReadCloser) error { return r.Close() }

type snap []byte

func (s snap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (s snap) Release() {}

type node struct {
	r     *raft.Raft
	fsm   *fsm
	store store
	dir   string
}

type cluster struct {
	nodes   []*node
	retries atomic.Int64 // applies retried after the leader changed
}

// leaderRaft returns the current leader, waiting for one.
func (c *cluster) leaderRaft() *raft.Raft {
	for {
		r, err := c.leader()
		if err == nil {
			return r
		}
	}
}

func config(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr})
	return c
}

func startCluster(e engine, dir string) (*cluster, error) {
	c := &cluster{}
	var conf raft.Configuration
	var trans []*raft.InmemTransport
	for i := range 3 {
		addr, t := raft.NewInmemTransport("")
		trans = append(trans, t)
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(fmt.Sprint("n", i)), Address: addr})
	}
	for i, t := range trans {
		for j, u := range trans {
			if i != j {
				t.Connect(conf.Servers[j].Address, u)
			}
		}
	}
	for i := range 3 {
		nd := &node{fsm: &fsm{seen: map[uint64]bool{}}, dir: filepath.Join(dir, fmt.Sprint("n", i))}
		s, err := e.open(nd.dir)
		if err != nil {
			c.close()
			return nil, err
		}
		nd.store = s
		id := conf.Servers[i].ID
		snaps := raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(config(id), s, s, snaps, trans[i], conf); err != nil {
			c.close()
			return nil, err
		}
		nd.r, err = raft.NewRaft(config(id), nd.fsm, s, s, snaps, trans[i])
		if err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

func (c *cluster) leader() (*raft.Raft, error) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, n := range c.nodes {
			if n.r.State() == raft.Leader {
				return n.r, nil
			}
		}
	}
	return nil, errors.New("no leader in 30 s")
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		if n.r != nil {
			n.r.Shutdown().Error()
		}
		n.store.Close()
	}
}

// check waits until every FSM applied ids 0..n-1, once each.
func (c *cluster) check(n uint64) error {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok := true
		for i, nd := range c.nodes {
			nd.fsm.mu.Lock()
			applied, seen, dups := nd.fsm.applied, len(nd.fsm.seen), nd.fsm.dups
			nd.fsm.mu.Unlock()
			if int64(dups) > c.retries.Load() {
				return fmt.Errorf("node %d applied %d commands twice, after %d retries", i, dups, c.retries.Load())
			}
			if applied != n+uint64(dups) || uint64(seen) != n {
				ok = false
				if time.Now().After(deadline) {
					return fmt.Errorf("node %d applied %d of %d commands", i, applied, n)
				}
			}
		}
		if ok {
			return nil
		}
	}
}

// applyResult is one throughput run.
type applyResult struct {
	ops      float64
	p50, p99 time.Duration
}

// applyLoad applies commands from appliers goroutines at the leader, for
// dur or until n commands (whichever is given), starting at id next.
func applyLoad(c *cluster, appliers int, dur time.Duration, n uint64, next *atomic.Uint64, cmdBytes int) (applyResult, error) {
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	var done atomic.Uint64
	start := time.Now()
	stop := start.Add(dur)
	limit := next.Load() + n
	var wg sync.WaitGroup
	for range appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for (dur == 0 || time.Now().Before(stop)) && (n == 0 || next.Load() < limit) {
				id := next.Add(1) - 1
				if n != 0 && id >= limit {
					break
				}
				cmd := make([]byte, cmdBytes)
				binary.LittleEndian.PutUint64(cmd, id)
				t0 := time.Now()
				// A command whose leader lost its leadership may or may
				// not have committed: retried at the new leader, it may
				// apply twice (check allows one duplicate per retry).
				for try := 0; ; try++ {
					err := c.leaderRaft().Apply(cmd, 30*time.Second).Error()
					if err == nil {
						break
					}
					if try == 100 || !(errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrEnqueueTimeout)) {
						mu.Lock()
						firstErr = cmp(firstErr, fmt.Errorf("apply %d: %w", id, err))
						mu.Unlock()
						return
					}
					c.retries.Add(1)
					time.Sleep(10 * time.Millisecond)
				}
				mine = append(mine, time.Since(t0))
				done.Add(1)
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return applyResult{}, firstErr
	}
	slices.Sort(lats)
	q := func(p float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(p*float64(len(lats))))]
	}
	return applyResult{ops: float64(done.Load()) / el.Seconds(), p50: q(0.50), p99: q(0.99)}, nil
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// diskUsage is the space allocated to the files under dir (st_blocks).
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !fi.IsDir() {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// storeFuncs are github.com/hashicorp/raft/bench's functions.
var storeFuncs = []struct {
	name string
	fn   func(*testing.B, store)
}{
	{"StoreLogs", func(b *testing.B, s store) { raftbench.StoreLogs(b, s) }},
	{"StoreLog", func(b *testing.B, s store) { raftbench.StoreLog(b, s) }},
	{"GetLog", func(b *testing.B, s store) { raftbench.GetLog(b, s) }},
	{"FirstIndex", func(b *testing.B, s store) { raftbench.FirstIndex(b, s) }},
	{"LastIndex", func(b *testing.B, s store) { raftbench.LastIndex(b, s) }},
	{"DeleteRange", func(b *testing.B, s store) { raftbench.DeleteRange(b, s) }},
	{"Set", func(b *testing.B, s store) { raftbench.Set(b, s) }},
	{"SetUint64", func(b *testing.B, s store) { raftbench.SetUint64(b, s) }},
	{"Get", func(b *testing.B, s store) { raftbench.Get(b, s) }},
	{"GetUint64", func(b *testing.B, s store) { raftbench.GetUint64(b, s) }},
}

// runFuncs runs each of raft's bench functions on a new store of e.
func runFuncs(e engine, base string, f figures) error {
	for i, sf := range storeFuncs {
		dir := filepath.Join(base, fmt.Sprintf("%s-func%d", e.name, i))
		var openErr error
		r := testing.Benchmark(func(b *testing.B) {
			os.RemoveAll(dir)
			s, err := e.open(dir)
			if err != nil {
				openErr = err
				b.SkipNow()
			}
			defer s.Close()
			sf.fn(b, s)
		})
		os.RemoveAll(dir)
		if openErr != nil {
			return openErr
		}
		if r.N == 0 {
			return fmt.Errorf("%s failed", sf.name)
		}
		f["fn."+sf.name] = float64(r.NsPerOp()) / 1e9
	}
	return nil
}

// figures of one engine in one round, by row id.
type figures map[string]float64

// runEngine runs one round's workloads on e.
func runEngine(o options, e engine, base string, disk bool, log io.Writer) (figures, error) {
	f := figures{}
	if err := runFuncs(e, base, f); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, e.name)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := startCluster(e, dir)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if _, err := c.leader(); err != nil {
		return nil, err
	}
	var next atomic.Uint64
	for _, a := range []int{1, 16} {
		res, err := applyLoad(c, a, o.dur, 0, &next, o.cmdBytes)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "raftbench: %s, %d appliers: %.0f commands/s, p50 %v, p99 %v\n", e.name, a, res.ops, res.p50, res.p99)
		f[fmt.Sprintf("apply%d.ops", a)] = res.ops
		f[fmt.Sprintf("apply%d.p50", a)] = res.p50.Seconds()
		f[fmt.Sprintf("apply%d.p99", a)] = res.p99.Seconds()
	}
	if disk {
		t0 := time.Now()
		if _, err := applyLoad(c, 64, 0, uint64(o.n)-next.Load(), &next, o.cmdBytes); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "raftbench: %s: %d commands in %v\n", e.name, next.Load(), time.Since(t0).Round(time.Millisecond))
	}
	if err := c.check(next.Load()); err != nil {
		return nil, fmt.Errorf("%s: %w", e.name, err)
	}
	if disk {
		// A snapshot on every node; raft compacts its log after each,
		// keeping TrailingLogs entries.
		for _, nd := range c.nodes {
			if err := nd.r.Snapshot().Error(); err != nil {
				return nil, fmt.Errorf("%s: snapshot: %w", e.name, err)
			}
		}
		var total int64
		for _, nd := range c.nodes {
			u, err := diskUsage(nd.dir)
			if err != nil {
				return nil, err
			}
			total += u
		}
		f["disk.bytes"] = float64(total) / 3
		f["retries"] = float64(c.retries.Load())
		fmt.Fprintf(log, "raftbench: %s: %.1f MiB per node after %d commands, a snapshot and compaction\n", e.name, float64(total)/3/(1<<20), next.Load())
	}
	return f, nil
}

type row struct {
	id, what string
	unit     string // "ops", "s", "B"
	higher   bool
	diskOnly bool
}

var rows = []row{
	{"apply1.ops", "committed commands/s, 1 applier", "ops", true, false},
	{"apply1.p50", "apply latency p50, 1 applier", "s", false, false},
	{"apply1.p99", "apply latency p99, 1 applier", "s", false, false},
	{"apply16.ops", "committed commands/s, 16 appliers", "ops", true, false},
	{"apply16.p50", "apply latency p50, 16 appliers", "s", false, false},
	{"apply16.p99", "apply latency p99, 16 appliers", "s", false, false},
	{"disk.bytes", "disk space per node after the commands, a snapshot and compaction", "B", false, true},
}

func init() {
	for _, sf := range storeFuncs {
		rows = append(rows, row{"fn." + sf.name, "raft/bench." + sf.name + ": time per call", "s", false, false})
	}
}

func run(o options, log io.Writer) (string, error) {
	base := o.dir
	if base == "" {
		var err error
		if base, err = os.MkdirTemp("", "raftbench"); err != nil {
			return "", err
		}
		defer os.RemoveAll(base)
	}
	var loads []float64
	res := map[string][]figures{}
	start := time.Now()
	for round := 1; round <= o.rounds; round++ {
		order := slices.Clone(engines)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, e := range order {
			loads = append(loads, loadavg())
			f, err := runEngine(o, e, base, round == 1, log)
			if err != nil {
				return "", fmt.Errorf("round %d: %s: %w", round, e.name, err)
			}
			res[e.name] = append(res[e.name], f)
		}
	}
	return report(o, res, loads, base, time.Since(start)), nil
}

func loadavg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

func median(v []float64) (med, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2], s[0], s[len(s)-1]
}

func format(v float64, unit string) string {
	switch unit {
	case "ops":
		if v >= 1000 {
			return fmt.Sprintf("%.1fk", v/1000)
		}
		return fmt.Sprintf("%.0f", v)
	case "s":
		d := time.Duration(v * float64(time.Second))
		switch {
		case d >= time.Second:
			return fmt.Sprintf("%.2f s", d.Seconds())
		case d >= time.Millisecond:
			return fmt.Sprintf("%.2f ms", float64(d)/1e6)
		case d >= 10*time.Microsecond:
			return fmt.Sprintf("%.0f µs", float64(d)/1e3)
		}
		return fmt.Sprintf("%.2f µs", float64(d)/1e3)
	case "B":
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprint(v)
}

func ratio(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

func report(o options, res map[string][]figures, loads []float64, base string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# raftbench results\n\n")
	fmt.Fprintf(&b, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- commit: %s\n", commit())
	cmd := "go run ./cmd/raftbench " + strings.Join(os.Args[1:], " ")
	fmt.Fprintf(&b, "- command (in bench/): `%s`\n", strings.TrimSpace(cmd))
	fmt.Fprintf(&b, "- machine: %d CPUs, %s %s/%s, stores under %s\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, base)
	fmt.Fprintf(&b, "- cluster: 3 nodes of github.com/hashicorp/raft v1.7.2 in one process, raft.NewInmemTransport, raft's default config but 200 ms heartbeat, election and lease timeouts (so SnapshotThreshold 8192, TrailingLogs 10240, MaxAppendEntries 64), raft.NewInmemSnapshotStore, an FSM that counts and checks every command applied once on every node\n")
	fmt.Fprintf(&b, "- stores: kvraft.Open(dir, nil) (kv's defaults: every write fdatasynced before it returns) and raft-boltdb/v2 v2.3.1 NewBoltStore (bbolt v1.5.0, its defaults: fsync at every commit), a directory of its own per node\n")
	fmt.Fprintf(&b, "- store functions: github.com/hashicorp/raft/bench's, each on a new store in a new directory, through testing.Benchmark (%s each)\n", flag.Lookup("test.benchtime").Value)
	fmt.Fprintf(&b, "- workloads: commands of %d bytes applied at the leader by 1, then 16 goroutines, each waiting for raft.Apply's future (committed on a majority and applied by the leader's FSM) before the next, for %v each; then, in round 1 only, commands from 64 goroutines up to %d in all, a raft.Snapshot on every node and the compaction that follows, and the space allocated (st_blocks) to each node's store directory, averaged over the nodes\n", o.cmdBytes, o.dur, o.n)
	ml, lo, hi := median(loads)
	fmt.Fprintf(&b, "- rounds: %d, each on a new cluster in new directories; kvraft first in odd rounds, raft-boltdb first in even ones; the run took %v\n", o.rounds, took.Round(time.Second))
	fmt.Fprintf(&b, "- load: the machine's 1-minute load average before each of the run's %d steps: median %.1f (%.1f–%.1f)\n\n", len(loads), ml, lo, hi)
	fmt.Fprintf(&b, "## kvraft and raft-boltdb under a 3-node raft cluster\n\n")
	fmt.Fprintf(&b, "Median (min–max) over the rounds; ↑ higher is better, ↓ lower is better. The ratio is kvraft's figure ÷ raft-boltdb's within each round: its median and range over the rounds.\n\n")
	fmt.Fprintf(&b, "| row | workload | kvraft | raft-boltdb | kvraft ÷ raft-boltdb |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		k, bo := res["kvraft"], res["raft-boltdb"]
		var kv, bv, rt []float64
		for i := range min(len(k), len(bo)) {
			x, ok1 := k[i][r.id]
			y, ok2 := bo[i][r.id]
			if !ok1 || !ok2 {
				continue
			}
			kv, bv = append(kv, x), append(bv, y)
			if y != 0 {
				rt = append(rt, x/y)
			}
		}
		if len(kv) == 0 {
			continue
		}
		arrow := "↓"
		if r.higher {
			arrow = "↑"
		}
		km, kl, kh := median(kv)
		bm, bl, bh := median(bv)
		rm, rl, rh := median(rt)
		cell := func(m, l, h float64) string {
			if len(kv) == 1 {
				return format(m, r.unit)
			}
			return fmt.Sprintf("%s (%s–%s)", format(m, r.unit), format(l, r.unit), format(h, r.unit))
		}
		rc := ratio(rm)
		if len(rt) > 1 {
			rc = fmt.Sprintf("%s (%s–%s)", ratio(rm), ratio(rl), ratio(rh))
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s |\n", r.id, r.what, arrow, cell(km, kl, kh), cell(bm, bl, bh), rc)
	}
	return b.String()
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
