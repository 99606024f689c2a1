package killtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// Program is the traced program of a workload: it runs against fsys (a
// recording file system) with the store options opts, and records its
// promises with rec.Issue and rec.Ack.
type Program func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error

// Workload is a traced program and the directory it starts from.
type Workload struct {
	Name    string
	Doc     string
	Dir     string
	Initial State      // the data directory before the program, all durable
	Options kv.Options // store options of the program and of every recovery
	Program Program
	// Ops are the operations the program issues, numbered from 1, each
	// committing one record; nil for a program that only recovers.
	Ops []kv.Op
}

// Config selects what Check does.
type Config struct {
	Models []Model // default: process and machine
	Bug    recovery.Bug
	Seed   uint64
	// MaxStates caps the machine states enumerated at one crash point;
	// past it they are sampled (and the report says so). 0 means 64.
	MaxStates int
	// Pessimistic is the number of pessimistic states sampled per crash
	// point; 0 means 4.
	Pessimistic int
	// NoNested skips the recovery of crashed recoveries.
	NoNested bool
}

// Bad describes a state that failed a check.
type Bad struct {
	Model  Model
	Point  int    // crash after this many events
	Events int    // of this many
	Event  string // the event after which the crash happened
	Nested string // for a nested state: how it came about
	Reason string
	Diff   string // go-cmp diff (-want +got) of the maps, when they differ
}

// String is the report's line for the first bad state.
func (b *Bad) String() string {
	where := fmt.Sprintf("crash after event %d of %d (%s)", b.Point, b.Events, b.Event)
	if b.Point == 0 {
		where = fmt.Sprintf("crash before the first of %d events", b.Events)
	}
	if b.Nested != "" {
		where = b.Nested + ", then its recovery's " + where
	}
	return fmt.Sprintf("%s: %s", where, b.Reason)
}

// ModelReport counts the states of one model.
type ModelReport struct {
	Model       Model
	States      int
	Distinct    int
	Bad         int
	BadDistinct int
	Sampled     bool
	First       *Bad `json:",omitempty"`
}

// Report is the outcome of Check on one workload.
type Report struct {
	Workload    string
	Bug         recovery.Bug `json:",omitempty"`
	Events      int
	Counts      map[string]int
	CrashPoints int
	Models      []*ModelReport
	Nested      *ModelReport `json:",omitempty"`
	Recoveries  int
	Duration    time.Duration
}

// Ok reports whether no state was bad.
func (r *Report) Ok() bool {
	for _, m := range r.Models {
		if m.Bad > 0 {
			return false
		}
	}
	return r.Nested == nil || r.Nested.Bad == 0
}

// outcome is the recovery of one state.
type outcome struct {
	dump string
	rev  record.Revision
	err  error
}

// syncDelay is how long a traced sync takes: long enough for the other
// goroutines of the program to run meanwhile, as they do while a real
// fdatasync waits for the disk, so that the trace shows what a program
// does before its sync returns.
const syncDelay = 20 * time.Microsecond

// checker holds the state of one Check.
type checker struct {
	w       Workload
	cfg     Config
	opts    kv.Options
	rng     *rand.Rand
	cache   map[uint64]outcome
	prefix  []string // dump after the first m ops
	want    string   // for recovery-only workloads
	rev0    record.Revision
	report  *Report
	nestedT map[uint64]bool // states whose recovery was crashed already
}

// recoverState runs recovery on a copy of s and returns the map.
func (c *checker) recoverState(s State) (out outcome) {
	h := s.Hash()
	if o, ok := c.cache[h]; ok {
		return o
	}
	defer func() {
		if r := recover(); r != nil {
			out = outcome{err: fmt.Errorf("recovery panicked: %v", r)}
		}
		c.cache[h] = out
	}()
	c.report.Recoveries++
	fsys, err := memFS(c.w.Dir, s)
	if err != nil {
		return outcome{err: err}
	}
	o := c.opts
	o.FS = fsys
	st, err := kv.Open(c.w.Dir, &o)
	if err != nil {
		return outcome{err: err}
	}
	out = outcome{dump: dump(st), rev: st.Revision()}
	if err := st.Close(); err != nil {
		out.err = err
	}
	return out
}

// Check traces the workload's program, builds every state the selected
// crash models allow after each event, recovers each and checks the
// properties of DESIGN.md; then it crashes the recovery of every distinct
// state the same way.
func Check(w Workload, cfg Config) (*Report, error) {
	start := time.Now()
	if len(cfg.Models) == 0 {
		cfg.Models = []Model{Process, Machine}
	}
	if cfg.MaxStates <= 0 {
		cfg.MaxStates = 64
	}
	if cfg.Pessimistic <= 0 {
		cfg.Pessimistic = 4
	}
	c := &checker{w: w, cfg: cfg, opts: w.Options, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6b76)),
		cache: map[uint64]outcome{}, nestedT: map[uint64]bool{},
		report: &Report{Workload: w.Name, Bug: cfg.Bug, Counts: map[string]int{}}}
	c.opts.Bug = cfg.Bug

	// What a recovery without a crash gives.
	base := c.recoverState(w.Initial)
	if base.err != nil {
		return nil, fmt.Errorf("killtest: the initial directory does not recover: %w", base.err)
	}
	c.want, c.rev0 = base.dump, base.rev
	if w.Ops != nil {
		c.prefix = modelPrefixes(base, w.Ops)
	}

	events, err := c.trace(nil)
	if err != nil {
		return nil, err
	}
	c.report.Events = len(events)
	c.report.CrashPoints = len(events) + 1
	for _, e := range events {
		c.report.Counts[e.Kind.String()]++
	}
	var distinct []State
	seen := map[uint64]bool{}
	note := func(s State) {
		if h := s.Hash(); !seen[h] {
			seen[h] = true
			distinct = append(distinct, s)
		}
	}
	for _, model := range cfg.Models {
		mr := &ModelReport{Model: model}
		c.report.Models = append(c.report.Models, mr)
		if model == FsyncFailure {
			if err := c.fsyncFailure(mr, events); err != nil {
				return nil, err
			}
			continue
		}
		c.walk(mr, events, model, nil, func(s State) { note(s) })
	}
	if !cfg.NoNested {
		mr := &ModelReport{Model: "nested recovery"}
		c.report.Nested = mr
		for _, s := range distinct {
			c.nested(mr, s)
		}
	}
	c.report.Duration = time.Since(start)
	return c.report, nil
}

// trace runs the program on a recording file system over the initial
// state and returns its events.
func (c *checker) trace(failSync func(int) bool) ([]vfs.Event, error) {
	fsys, err := memFS(c.w.Dir, c.w.Initial)
	if err != nil {
		return nil, err
	}
	rec := vfs.NewRecorder(fsys, initialNames(c.w.Dir, c.w.Initial))
	rec.FailSync = failSync
	rec.SyncDelay = syncDelay
	o := c.opts
	o.FS = rec
	err = c.w.Program(rec, c.w.Dir, o, rec)
	if err != nil && failSync == nil {
		return nil, fmt.Errorf("killtest: the traced program failed: %w", err)
	}
	return rec.Events(), nil
}

// walk replays events and checks the states of model after each.
func (c *checker) walk(mr *ModelReport, events []vfs.Event, model Model, onlyAfter func(int) bool, note func(State)) {
	m := newModel(c.w.Dir, c.w.Initial)
	seenHere := map[uint64]bool{}
	badHere := map[uint64]bool{}
	lastAck, lastIssue := 0, 0
	for k := 0; k <= len(events); k++ {
		if k > 0 {
			e := events[k-1]
			m.apply(e)
			switch e.Kind {
			case vfs.EvAck:
				lastAck = max(lastAck, e.N)
			case vfs.EvIssue:
				lastIssue = max(lastIssue, e.N)
			}
		}
		if onlyAfter != nil && !onlyAfter(k) {
			continue
		}
		var states []State
		switch model {
		case Process:
			states = []State{m.processState()}
		case Machine, FsyncFailure:
			var sampled bool
			states, sampled = m.machineStates(c.cfg.MaxStates, c.rng)
			mr.Sampled = mr.Sampled || sampled
		case Pessimistic:
			states = m.pessimisticStates(c.cfg.Pessimistic, c.rng)
			mr.Sampled = true
		}
		for _, s := range states {
			mr.States++
			h := s.Hash()
			if !seenHere[h] {
				seenHere[h] = true
				mr.Distinct++
			}
			if note != nil {
				note(s)
			}
			if bad := c.judge(s, lastAck, lastIssue); bad != nil {
				mr.Bad++
				if !badHere[h] {
					badHere[h] = true
					mr.BadDistinct++
				}
				if mr.First == nil {
					bad.Model, bad.Point, bad.Events = model, k, len(events)
					if k > 0 {
						bad.Event = events[k-1].String()
					}
					mr.First = bad
				}
			}
		}
	}
}

// judge recovers s and checks it against the workload: nil when good.
func (c *checker) judge(s State, lastAck, lastIssue int) *Bad {
	o := c.recoverState(s)
	if o.err != nil {
		return &Bad{Reason: "recovery failed: " + o.err.Error()}
	}
	if c.prefix == nil {
		if o.dump != c.want {
			return &Bad{Reason: "recovery: " + DescribeDiff(parseDump(c.want), parseDump(o.dump)), Diff: mapDiff(c.want, o.dump)}
		}
		return nil
	}
	m := int(o.rev - c.rev0)
	switch {
	case o.rev < c.rev0 || m < lastAck:
		want := c.prefix[min(lastAck, len(c.prefix)-1)]
		reason := fmt.Sprintf("acknowledged operation lost: recovered revision %d, operation %d was acknowledged", o.rev, lastAck)
		if d := DescribeDiff(parseDump(want), parseDump(o.dump)); d != "same map" {
			reason += ": " + d
		}
		return &Bad{Reason: reason, Diff: mapDiff(want, o.dump)}
	case m > len(c.prefix)-1 || m > lastIssue:
		return &Bad{Reason: fmt.Sprintf("recovered revision %d, but only %d operations were issued", o.rev, lastIssue)}
	case o.dump != c.prefix[m]:
		return &Bad{Reason: fmt.Sprintf("the map at revision %d is not the map after operation %d: %s", o.rev, m,
			DescribeDiff(parseDump(c.prefix[m]), parseDump(o.dump))), Diff: mapDiff(c.prefix[m], o.dump)}
	}
	return nil
}

// fsyncFailure reruns the program once per sync with that sync failing,
// and checks the machine crash states after the failure.
func (c *checker) fsyncFailure(mr *ModelReport, events []vfs.Event) error {
	syncs := 0
	for _, e := range events {
		if e.Kind == vfs.EvSync {
			syncs++
		}
	}
	for j := 1; j <= syncs; j++ {
		evs, err := c.trace(func(n int) bool { return n == j })
		if err != nil {
			return err
		}
		failedAt := -1
		for i, e := range evs {
			if e.Kind == vfs.EvSyncFail {
				failedAt = i + 1
				break
			}
		}
		if failedAt < 0 {
			continue
		}
		had := mr.First != nil
		c.walk(mr, evs, FsyncFailure, func(k int) bool { return k >= failedAt }, nil)
		if !had && mr.First != nil {
			mr.First.Reason = fmt.Sprintf("with sync %d failing: %s", j, mr.First.Reason)
		}
	}
	return nil
}

// nested traces the recovery of s and checks every process and machine
// crash of it: recovering any of those states must give the map that
// recovering s gives, and recovering twice must change nothing.
func (c *checker) nested(mr *ModelReport, s State) {
	h := s.Hash()
	if c.nestedT[h] {
		return
	}
	c.nestedT[h] = true
	want := c.recoverState(s)
	if want.err != nil {
		return // already reported where s was found
	}
	fsys, err := memFS(c.w.Dir, s)
	if err != nil {
		return
	}
	rec := vfs.NewRecorder(fsys, initialNames(c.w.Dir, s))
	o := c.opts
	o.FS = rec
	first := func(b *Bad) {
		mr.Bad++
		mr.BadDistinct++
		if mr.First == nil {
			mr.First = b
		}
	}
	st, err := kv.Open(c.w.Dir, &o)
	if err != nil {
		first(&Bad{Model: "nested recovery", Nested: "a crash state", Reason: "traced recovery failed: " + err.Error()})
		return
	}
	if d := dump(st); d != want.dump {
		first(&Bad{Model: "nested recovery", Nested: "a crash state", Reason: "the same state recovered to two maps: " +
			DescribeDiff(parseDump(want.dump), parseDump(d))})
	}
	st.Close()
	// Recovering twice changes nothing.
	after, _ := readState(fsys, c.w.Dir)
	if again := c.recoverState(after); again.err != nil || again.dump != want.dump {
		first(&Bad{Model: "nested recovery", Nested: "a crash state", Reason: fmt.Sprintf("a second recovery changed the map (%v)", again.err)})
	}
	events := rec.Events()
	inner := &checker{w: Workload{Dir: c.w.Dir, Initial: s}, cfg: c.cfg, opts: c.opts, rng: c.rng, cache: c.cache,
		want: want.dump, report: c.report, nestedT: c.nestedT}
	for _, model := range []Model{Process, Machine} {
		sub := &ModelReport{Model: model}
		inner.walk(sub, events, model, nil, nil)
		mr.States += sub.States
		mr.Distinct += sub.Distinct
		mr.Bad += sub.Bad
		mr.BadDistinct += sub.BadDistinct
		mr.Sampled = mr.Sampled || sub.Sampled
		if sub.First != nil && mr.First == nil {
			sub.First.Nested = fmt.Sprintf("a state of the first program (%s)", describeState(s))
			sub.First.Reason = "second recovery: " + sub.First.Reason
			mr.First = sub.First
		}
	}
}

func describeState(s State) string {
	names := s.Names()
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %dB", n, len(s[n]))
	}
	return fmt.Sprint(parts)
}

// modelPrefixes returns the dump after each prefix of ops applied to the
// base map.
func modelPrefixes(base outcome, ops []kv.Op) []string {
	m := record.NewMap()
	for k, v := range parseDump(base.dump) {
		m.Load(&record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: 1, ModRev: 1, Version: 1})
	}
	out := []string{base.dump}
	for i, op := range ops {
		op := op
		// A failing add would not commit; the workloads never issue one.
		_ = m.Apply(&record.Record{Revision: base.rev + record.Revision(i+1), Ops: []record.Op{op}})
		out = append(out, dumpMap(m))
	}
	return out
}

func dumpMap(m *record.Map) string {
	s := ""
	for e := range m.All(nil, nil) {
		s += fmt.Sprintf("%q=%q\n", e.Key, e.Value)
	}
	return s
}

// Print writes the report in the article's form.
func (r *Report) Print(w interface{ Write([]byte) (int, error) }) {
	kinds := make([]string, 0, len(r.Counts))
	for k := range r.Counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := ""
	for i, k := range kinds {
		if i > 0 {
			parts += ", "
		}
		parts += fmt.Sprintf("%d %s", r.Counts[k], k)
	}
	fmt.Fprintf(w, "events: %d (%s)\n", r.Events, parts)
	fmt.Fprintf(w, "crash points: %d\n", r.CrashPoints)
	line := func(mr *ModelReport, label string) {
		sampled := ""
		if mr.Sampled {
			sampled = " [sampled]"
		}
		if mr.Model == Process {
			fmt.Fprintf(w, "%s: %d states, %d bad%s\n", label, mr.States, mr.Bad, sampled)
			return
		}
		fmt.Fprintf(w, "%s: %d states (%d distinct), %d bad (%d distinct)%s\n", label, mr.States, mr.Distinct, mr.Bad, mr.BadDistinct, sampled)
	}
	all := append([]*ModelReport(nil), r.Models...)
	for _, mr := range r.Models {
		line(mr, string(mr.Model)+" crash")
	}
	if r.Nested != nil {
		line(r.Nested, "nested recovery")
		all = append(all, r.Nested)
	}
	for _, mr := range all {
		if mr.First != nil {
			fmt.Fprintf(w, "first bad %s state: %s\n", mr.Model, mr.First)
			if mr.First.Diff != "" {
				fmt.Fprintf(w, "map (-want +got):\n%s", mr.First.Diff)
			}
		}
	}
}

var _ = errors.New
var _ = path.Join
