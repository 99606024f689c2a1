package crashsim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
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
	// Txns, when set instead of Ops, are transactions the program submits
	// in order from one goroutine (so that they commit in that order),
	// numbered from 1: fenced writes and compares among them, whose
	// outcomes the checker works out itself (see reference).
	Txns []kv.Txn
	// Leases, when set instead, are the steps of a leases workload
	// (leases.go), numbered from 1, each committing the records the
	// checker's lease model works out.
	Leases []LeaseStep
}

// txns returns the workload's operations as transactions: a plain
// operation is a transaction of that one operation.
func (w Workload) txns() []kv.Txn {
	if w.Txns != nil || w.Ops == nil {
		return w.Txns
	}
	out := make([]kv.Txn, len(w.Ops))
	for i, op := range w.Ops {
		out[i] = kv.Txn{Then: []kv.Op{op}}
	}
	return out
}

// Config selects what Check does.
type Config struct {
	Models []Model // default: process and machine
	Bug    variant.Bug
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
	Bug         variant.Bug `json:",omitempty"`
	Events      int
	Counts      map[string]int
	CrashPoints int
	Models      []*ModelReport
	Nested      *ModelReport `json:",omitempty"`
	// Wrong lists operations whose outcome, as the store reported it to
	// the program (committed at a revision, or refused), differs from the
	// reference's: a fence or a compare judged against the wrong state.
	Wrong      []string `json:",omitempty"`
	Recoveries int
	Duration   time.Duration
}

// Ok reports whether no state was bad and every outcome was right.
func (r *Report) Ok() bool {
	for _, m := range r.Models {
		if m.Bad > 0 {
			return false
		}
	}
	return len(r.Wrong) == 0 && (r.Nested == nil || r.Nested.Bad == 0)
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
	w    Workload
	cfg  Config
	opts kv.Options
	rng  *rand.Rand
	// cache holds the recovery of each state (by content hash). Its
	// dumps are interned in dumps, one string per distinct map: most of
	// the many thousands of states a workload has recover to one of the
	// few maps its operations pass through, and a cache of a dump per
	// state would grow with the states (to 600 MB in the image workload).
	cache map[uint64]outcome
	dumps map[string]string
	ref   *reference // the operations' outcomes and the maps after them
	want  string     // for recovery-only workloads
	rev0  record.Revision
	// start, for the recovery of a crashed program's process-crash
	// state, is the simulated file system as that crash left it: its
	// unsynced writes and namespace changes are the inner program's
	// starting point, and every crash model applies to them.
	start *inherited
	// outer is the checker of the crashed program, for a nested one.
	outer   *checker
	report  *Report
	nestedT map[uint64]bool // states whose recovery was crashed already
	// inherit holds, for each process-crash state (by content hash), the
	// simulated file system it came from, for its nested recovery.
	inherit map[uint64]*inherited
}

// inherited is a process-crash state as the nested recovery starts from
// it: the simulated file system, unsynced parts and all, and what the
// crashed program had been promised and had issued by then.
type inherited struct {
	m       *fsModel
	durable record.Revision
	issued  int
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
	o.FS = variant.Wrap(fsys, c.cfg.Bug)
	st, err := kv.Open(c.w.Dir, &o)
	if err != nil {
		return outcome{err: err}
	}
	d := dump(st)
	if in, ok := c.dumps[d]; ok {
		d = in
	} else {
		c.dumps[d] = d
	}
	out = outcome{dump: d, rev: st.Revision()}
	if err := st.Close(); err != nil {
		out.err = err
	}
	return out
}

// Check traces the workload's program, builds every state the selected
// crash models allow after each event, recovers each and checks the
// properties the package doc lists; then it crashes the recovery of every
// distinct state the same way.
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
		cache: map[uint64]outcome{}, dumps: map[string]string{}, nestedT: map[uint64]bool{}, inherit: map[uint64]*inherited{},
		report: &Report{Workload: w.Name, Bug: cfg.Bug, Counts: map[string]int{}}}

	// What a recovery without a crash gives.
	base := c.recoverState(w.Initial)
	if base.err != nil {
		return nil, fmt.Errorf("crashsim: the initial directory does not recover: %w", base.err)
	}
	c.want, c.rev0 = base.dump, base.rev
	if txns := w.txns(); txns != nil {
		ref, err := newReference(base, txns)
		if err != nil {
			return nil, err
		}
		c.ref = ref
	} else if w.Leases != nil {
		ref, err := newLeaseReference(base, w.Leases)
		if err != nil {
			return nil, err
		}
		c.ref = ref
	}

	events, err := c.trace(nil)
	if err != nil {
		return nil, err
	}
	c.checkOutcomes(events)
	c.report.Events = len(events)
	c.report.CrashPoints = len(events) + 1
	for _, e := range events {
		c.report.Counts[e.Kind.String()]++
	}
	var distinct []State
	seen := map[uint64]bool{}
	note := func(s State, m *fsModel, model Model, durable record.Revision, issued int) {
		h := s.Hash()
		if model == Process {
			if _, ok := c.inherit[h]; !ok {
				c.inherit[h] = &inherited{m: m.clone(), durable: durable, issued: issued}
			}
		}
		if !seen[h] {
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
		c.walk(mr, events, model, nil, note)
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
	o.FS = variant.Wrap(rec, c.cfg.Bug) // above the recorder: it records what the disk sees
	err = c.w.Program(o.FS, c.w.Dir, o, rec)
	if err != nil && failSync == nil {
		return nil, fmt.Errorf("crashsim: the traced program failed: %w", err)
	}
	return rec.Events(), nil
}

// walk replays events and checks the states of model after each.
func (c *checker) walk(mr *ModelReport, events []vfs.Event, model Model, onlyAfter func(int) bool,
	note func(State, *fsModel, Model, record.Revision, int)) {
	m := newModel(c.w.Dir, c.w.Initial)
	if c.start != nil {
		m = c.start.m.clone()
	}
	// shown: the program has shown (acknowledged) its map; a nested
	// recovery's crash states must then give exactly that map.
	shown := false
	seenHere := map[uint64]bool{}
	badHere := map[uint64]bool{}
	// durable is the highest revision the program was promised durable
	// (by an ack, or by a read that saw it); lastIssue the highest
	// operation it issued.
	durable, lastIssue := c.rev0, 0
	for k := 0; k <= len(events); k++ {
		if k > 0 {
			e := events[k-1]
			m.apply(e)
			switch e.Kind {
			case vfs.EvAck:
				durable = max(durable, c.ackRevision(e))
				shown = true
			case vfs.EvRead:
				durable = max(durable, record.Revision(e.Rev))
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
				note(s, m, model, durable, lastIssue)
			}
			var bad *Bad
			if c.start != nil && !shown {
				// A nested recovery that has not shown its map yet: a
				// power loss may still take the crashed program's unsynced
				// writes, as it could have before the recovery began.
				bad = c.outer.judge(s, c.start.durable, c.start.issued)
			} else {
				bad = c.judge(s, durable, lastIssue)
			}
			if bad != nil {
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

// ackRevision is the revision an ack promises durable: the one the
// program saw, or the reference's for its operation.
func (c *checker) ackRevision(e vfs.Event) record.Revision {
	if e.Rev != 0 {
		return record.Revision(e.Rev)
	}
	if c.ref != nil && e.N >= 1 && e.N <= len(c.ref.ops) {
		return c.rev0 + record.Revision(c.ref.ops[e.N-1].committed)
	}
	return c.rev0
}

// judge recovers s and checks it against the workload: nil when good.
// durable is the highest revision promised durable before the crash,
// lastIssue the highest operation issued.
func (c *checker) judge(s State, durable record.Revision, lastIssue int) *Bad {
	if bad := c.judgeBackups(s); bad != nil {
		return bad
	}
	o := c.recoverState(s)
	if o.err != nil {
		return &Bad{Reason: "recovery failed: " + o.err.Error()}
	}
	if c.ref == nil {
		if o.dump != c.want {
			return &Bad{Reason: "recovery: " + describe(c.want, o.dump), Diff: mapDiff(c.want, o.dump)}
		}
		return nil
	}
	m := int(o.rev - c.rev0) // records committed since the start
	need := int(durable - c.rev0)
	switch {
	case o.rev < c.rev0 || m < need:
		want := c.ref.hist.Dump(min(need, c.ref.hist.Records()))
		reason := fmt.Sprintf("acknowledged operation lost: recovered revision %d, revision %d was promised durable", o.rev, durable)
		if d := describe(want, o.dump); d != "same map" {
			reason += ": " + d
		}
		return &Bad{Reason: reason, Diff: mapDiff(want, o.dump)}
	case m > c.ref.hist.Records() || m > c.ref.committedBy(lastIssue):
		return &Bad{Reason: fmt.Sprintf("recovered revision %d, but the %d operations issued commit at most %d records",
			o.rev, lastIssue, c.ref.committedBy(lastIssue))}
	case o.dump != c.ref.hist.Dump(m):
		return &Bad{Reason: fmt.Sprintf("the map at revision %d is not the map after %d records: %s", o.rev, m,
			describe(c.ref.hist.Dump(m), o.dump)), Diff: mapDiff(c.ref.hist.Dump(m), o.dump)}
	}
	return nil
}

// checkOutcomes compares the outcome the store reported for each
// operation of the trace with the reference's.
func (c *checker) checkOutcomes(events []vfs.Event) {
	if c.ref == nil {
		return
	}
	wrong := func(format string, args ...any) {
		if len(c.report.Wrong) < 10 {
			c.report.Wrong = append(c.report.Wrong, fmt.Sprintf(format, args...))
		}
	}
	for _, e := range events {
		if (e.Kind != vfs.EvAck && e.Kind != vfs.EvRefused) || e.N < 1 || e.N > len(c.ref.ops) {
			continue
		}
		want := c.ref.ops[e.N-1]
		switch {
		case e.Kind == vfs.EvRefused && want.commits:
			wrong("operation %d was refused (%s), but it commits at revision %d", e.N, e.Note, c.rev0+record.Revision(want.committed))
		case e.Kind == vfs.EvAck && !want.commits:
			wrong("operation %d committed at revision %d, but it commits nothing: %s", e.N, e.Rev, want.why)
		case e.Kind == vfs.EvAck && e.Rev != 0 && record.Revision(e.Rev) != c.rev0+record.Revision(want.committed):
			wrong("operation %d committed at revision %d, want %d", e.N, e.Rev, c.rev0+record.Revision(want.committed))
		}
	}
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
	// A process crash's state still holds the crashed program's unsynced
	// writes and namespace changes: the recovery starts from them, and
	// its own crashes may keep or lose them.
	start := c.inherit[h]
	rec := vfs.NewRecorder(fsys, initialNames(c.w.Dir, s))
	if start != nil {
		rec = vfs.NewRecorderInodes(fsys, start.m.inodePaths(), start.m.maxInode())
	}
	o := c.opts
	o.FS = variant.Wrap(rec, c.cfg.Bug) // above the recorder: it records what the disk sees
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
	// Open returned: the store serves its map, whose revisions a reader
	// may take as fencing tokens. From here on every crash must keep it.
	rec.Ack(0)
	// And it checkpoints what it replayed, as kv DIR dump does: the
	// recovery the article crashes.
	if st.Stats().RecoveryReplayed > 0 {
		if err := st.Checkpoint(); err != nil {
			first(&Bad{Model: "nested recovery", Nested: "a crash state", Reason: "the recovery's checkpoint failed: " + err.Error()})
		}
	}
	if d := dump(st); d != want.dump {
		first(&Bad{Model: "nested recovery", Nested: "a crash state", Reason: "the same state recovered to two maps: " +
			describe(want.dump, d)})
	}
	st.Close()
	// Recovering twice changes nothing.
	after, _ := readState(fsys, c.w.Dir)
	if again := c.recoverState(after); again.err != nil || again.dump != want.dump {
		first(&Bad{Model: "nested recovery", Nested: "a crash state", Reason: fmt.Sprintf("a second recovery changed the map (%v)", again.err)})
	}
	events := rec.Events()
	inner := &checker{w: Workload{Dir: c.w.Dir, Initial: s}, cfg: c.cfg, opts: c.opts, rng: c.rng, cache: c.cache, dumps: c.dumps,
		want: want.dump, report: c.report, nestedT: c.nestedT, start: start, outer: c, inherit: c.inherit}
	for _, model := range []Model{Process, Machine, Pessimistic} {
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

// reference works out, independently of the store, what each operation
// of a workload does when the operations commit in order from the base
// map: whether it commits a record (a fence that no longer holds, an add
// to a value that is not an integer, or a transaction whose branch taken
// has no operations commit nothing), and the map after each record.
type reference struct {
	ops  []refOp
	hist refHistory // the map after each record
}

// refHistory is the map after each record of a reference: an
// opmodel.History, or a leases workload's leaseHistory.
type refHistory interface {
	Dump(k int) string // after the first k records
	Records() int
}

// refOp is one operation's outcome.
type refOp struct {
	commits   bool
	committed int    // records committed up to and including this one
	why       string // why it commits nothing
}

func newReference(base outcome, txns []kv.Txn) (*reference, error) {
	baseMap, err := opmodel.ParseDump(base.dump)
	if err != nil {
		return nil, err
	}
	h := opmodel.NewHistory(baseMap, base.rev)
	ref := &reference{hist: h}
	for i := range txns {
		t := &txns[i]
		op := refOp{committed: h.Records()}
		ops, why := evaluate(h, t)
		if why == "" && len(ops) > 0 {
			if err := h.Commit(ops); err != nil {
				why = err.Error()
			} else {
				op.commits, op.committed = true, h.Records()
			}
		} else if why == "" {
			why = "the branch taken has no operations"
		}
		op.why = why
		ref.ops = append(ref.ops, op)
	}
	return ref, nil
}

// committedBy returns the records that the first n operations commit.
func (r *reference) committedBy(n int) int {
	if n <= 0 {
		return 0
	}
	return r.ops[min(n, len(r.ops))-1].committed
}

// evaluate judges t's fence and compares against the map of h now, as
// FORMAT.md and the kv package's documentation define them, and returns
// the operations of the branch taken, or why t commits nothing.
func evaluate(h *opmodel.History, t *kv.Txn) ([]kv.Op, string) {
	if f := t.Fence; f != nil {
		e, ok := h.Lookup(f.Key)
		switch {
		case !ok:
			return nil, "fenced: the fence key does not exist"
		case f.By == kv.FenceCreateRev && e.CreateRev != f.Token:
			return nil, fmt.Sprintf("fenced: created at %d, token %d", e.CreateRev, f.Token)
		case f.By == kv.FenceModRev && e.ModRev != f.Token:
			return nil, fmt.Sprintf("fenced: changed at %d, token %d", e.ModRev, f.Token)
		}
	}
	for _, c := range t.If {
		e, ok := h.Lookup(c.Key)
		if !compareHolds(c, e, ok) {
			return t.Else, ""
		}
	}
	return t.Then, ""
}

// compareHolds evaluates one compare against a key's entry (ok false when
// the key is absent): a missing key's value compares as absent (only "not
// equal" holds), its revisions, version and existence as 0.
func compareHolds(c kv.Compare, e record.Entry, ok bool) bool {
	var sign int
	if c.Target == record.TargetValue {
		if !ok {
			return c.Cmp == record.CmpNotEqual
		}
		sign = bytes.Compare(e.Value, c.Value)
	} else {
		var n int64
		if ok {
			switch c.Target {
			case record.TargetCreateRev:
				n = int64(e.CreateRev)
			case record.TargetModRev:
				n = int64(e.ModRev)
			case record.TargetVersion:
				n = e.Version
			case record.TargetExists:
				n = 1
			}
		}
		sign = cmpInt(n, c.Num)
	}
	switch c.Cmp {
	case record.CmpEqual:
		return sign == 0
	case record.CmpNotEqual:
		return sign != 0
	case record.CmpLess:
		return sign < 0
	case record.CmpGreater:
		return sign > 0
	}
	return false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
	for _, wr := range r.Wrong {
		fmt.Fprintf(w, "wrong outcome: %s\n", wr)
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
