package crashsim

import (
	"errors"
	"fmt"
	stdmaps "maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/internal/fakeclock"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
)

// The leases workload. Its program runs on a clock of its own that it
// moves by hand: it grants leases, binds keys to them, renews and revokes
// them, and moves the clock past deadlines, so that the store commits
// expiries (by its timer, at the write that follows a deadline, or at the
// open after a restart); each step is an operation that the checker's
// reference works out, independently of the store, down to the records
// it commits and the deadline of every lease. Every recovery the checker
// runs opens the store at leaseT0, before every deadline, so that nothing
// expires at a recovery and each recovered state shows its leases as
// logged: the dump lists them after the keys (leaseLine), and a deadline
// that a restart moved shows as a wrong map.

// leaseT0 is the time the workload's clock starts at, and the clock of
// every recovery the checker runs.
var leaseT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// LeaseStep is one operation of the leases workload. The clock first
// moves on by Advance (the store ends every lease whose deadline it
// passes, each with an expire record of its own); then, with Restart, the
// program closes the store and opens it again; then Op runs:
//
//	grant      Grant(TTL)
//	put-lease  PutLease(Key, Value, the Lease-th lease granted)
//	put        Put(Key, Value)
//	add        Add(Key, Delta)
//	del        a delete of Key (committed even when Key is absent)
//	keepalive  KeepAlive(the Lease-th lease)
//	revoke     Revoke(the Lease-th lease)
//	wait       nothing: the step is the expiries the clock's move causes
type LeaseStep struct {
	Advance time.Duration
	Restart bool
	Op      string
	Key     string
	Value   string
	Delta   int64
	Lease   int
	TTL     time.Duration
}

// String is the step as a report shows it.
func (s LeaseStep) String() string {
	var b strings.Builder
	if s.Advance > 0 {
		fmt.Fprintf(&b, "+%v ", s.Advance)
	}
	if s.Restart {
		b.WriteString("restart ")
	}
	b.WriteString(s.Op)
	switch s.Op {
	case "grant":
		fmt.Fprintf(&b, " %v", s.TTL)
	case "put-lease":
		fmt.Fprintf(&b, " %s %s lease#%d", s.Key, s.Value, s.Lease)
	case "put":
		fmt.Fprintf(&b, " %s %s", s.Key, s.Value)
	case "add":
		fmt.Fprintf(&b, " %s %d", s.Key, s.Delta)
	case "del":
		fmt.Fprintf(&b, " %s", s.Key)
	case "keepalive", "revoke":
		fmt.Fprintf(&b, " lease#%d", s.Lease)
	}
	return b.String()
}

// leaseModel is the reference's state: the map and the leases, worked
// out from FORMAT.md's "Leases" without the store or package record.
type leaseModel struct {
	rev0    record.Revision
	records int // committed since rev0
	now     time.Duration
	kv      map[string]string
	leases  []*modelLease // by grant number
	bound   map[string]*modelLease
	dumps   []string // dumps[k]: after the first k records
}

type modelLease struct {
	id            record.LeaseID
	ttl, deadline time.Duration // deadline since leaseT0
	keys          map[string]bool
	live          bool
}

func newLeaseModel(rev0 record.Revision) *leaseModel {
	m := &leaseModel{rev0: rev0, kv: map[string]string{}, bound: map[string]*modelLease{}}
	m.dumps = append(m.dumps, m.dump())
	return m
}

// commit notes one record committed.
func (m *leaseModel) commit() {
	m.records++
	m.dumps = append(m.dumps, m.dump())
}

func (m *leaseModel) unbind(key string) {
	if l := m.bound[key]; l != nil {
		delete(l.keys, key)
		delete(m.bound, key)
	}
}

// end ends lease l: its keys are deleted.
func (m *leaseModel) end(l *modelLease) {
	for k := range l.keys {
		delete(m.kv, k)
		delete(m.bound, k)
	}
	l.keys, l.live = nil, false
	m.commit()
}

// advance moves the clock and expires what it passes, in deadline order,
// then id order.
func (m *leaseModel) advance(d time.Duration) {
	m.now += d
	var due []*modelLease
	for _, l := range m.leases {
		if l.live && l.deadline <= m.now {
			due = append(due, l)
		}
	}
	slices.SortFunc(due, func(a, b *modelLease) int {
		if a.deadline != b.deadline {
			return int(a.deadline - b.deadline)
		}
		return int(a.id) - int(b.id)
	})
	for _, l := range due {
		m.end(l)
	}
}

// step applies s and returns whether its operation committed a record,
// and why not.
func (m *leaseModel) step(s LeaseStep) (bool, string) {
	m.advance(s.Advance)
	live := func() (*modelLease, string) {
		if s.Lease >= len(m.leases) {
			return nil, "no such lease"
		}
		if l := m.leases[s.Lease]; l.live {
			return l, ""
		}
		return nil, "the lease has ended"
	}
	switch s.Op {
	case "wait":
		return true, "" // its records are the expiries, if any
	case "grant":
		id := record.LeaseID(m.rev0) + record.LeaseID(m.records) + 1
		m.leases = append(m.leases, &modelLease{id: id, ttl: s.TTL, deadline: m.now + s.TTL, keys: map[string]bool{}, live: true})
	case "put-lease":
		l, why := live()
		if l == nil {
			return false, why
		}
		m.unbind(s.Key)
		m.kv[s.Key] = s.Value
		l.keys[s.Key] = true
		m.bound[s.Key] = l
	case "put":
		m.unbind(s.Key)
		m.kv[s.Key] = s.Value
	case "del":
		m.unbind(s.Key)
		delete(m.kv, s.Key)
	case "add":
		n := int64(0)
		if v, ok := m.kv[s.Key]; ok {
			var err error
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return false, "not an integer"
			}
		}
		m.kv[s.Key] = strconv.FormatInt(n+s.Delta, 10)
	case "keepalive":
		l, why := live()
		if l == nil {
			return false, why
		}
		l.deadline = max(l.deadline, m.now+l.ttl)
	case "revoke":
		l, why := live()
		if l == nil {
			return false, why
		}
		m.end(l)
		return true, ""
	default:
		panic("crashsim: unknown lease step " + s.Op)
	}
	m.commit()
	return true, ""
}

// dump is the model's map and leases as the store's dump prints them.
func (m *leaseModel) dump() string {
	var b strings.Builder
	for _, k := range slices.Sorted(stdmaps.Keys(m.kv)) {
		b.WriteString(opmodel.DumpLine([]byte(k), []byte(m.kv[k])))
	}
	for _, l := range m.leases {
		if l.live {
			b.WriteString(leaseLine(l.id, l.ttl, l.deadline, slices.Sorted(stdmaps.Keys(l.keys))))
		}
	}
	return b.String()
}

// leaseLine is a lease as a dump shows it: a line of the dump's format
// under a key no workload writes, so that a difference in a lease reads
// as a difference in the map.
func leaseLine(id record.LeaseID, ttl, deadline time.Duration, keys []string) string {
	return opmodel.DumpLine([]byte(fmt.Sprintf("\x00lease %d", id)),
		[]byte(fmt.Sprintf("ttl %v deadline t0+%v keys [%s]", ttl, deadline, strings.Join(keys, " "))))
}

// dumpLeases is the store's leases as dump lines.
func dumpLeases(s *kv.Store) string {
	ls, err := s.Leases()
	if err != nil {
		return "leases: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, l := range ls {
		keys := make([]string, len(l.Keys))
		for i, k := range l.Keys {
			keys[i] = string(k)
		}
		b.WriteString(leaseLine(l.ID, l.TTL, l.Deadline.Sub(leaseT0), keys))
	}
	return b.String()
}

// fixedClock reads t and never fires: the clock of the checker's
// recoveries, at which no lease has ended.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                     { return c.t }
func (fixedClock) After(time.Duration) <-chan time.Time { return nil }

// leaseOptions are smallOptions with the recoveries' clock.
var leaseOptions = kv.Options{SegmentSize: 1024, CheckpointBytes: 1024, LogRetention: 1024, Clock: fixedClock{leaseT0}}

// leaseHistory is the reference's history of a leases workload.
type leaseHistory struct{ dumps []string }

func (h *leaseHistory) Dump(k int) string { return h.dumps[k] }
func (h *leaseHistory) Records() int      { return len(h.dumps) - 1 }

// newLeaseReference works out the outcome of each step and the map and
// leases after each record, from the base map (which holds no lease).
func newLeaseReference(base outcome, steps []LeaseStep) (*reference, error) {
	if strings.Contains(base.dump, "\\x00lease") {
		return nil, errors.New("crashsim: the leases workload starts from a directory with leases")
	}
	m := newLeaseModel(base.rev)
	baseMap, err := opmodel.ParseDump(base.dump)
	if err != nil {
		return nil, err
	}
	m.kv = baseMap
	m.dumps[0] = base.dump
	ref := &reference{}
	for _, s := range steps {
		commits, why := m.step(s)
		ref.ops = append(ref.ops, refOp{commits: commits, committed: m.records, why: why})
	}
	ref.hist = &leaseHistory{dumps: m.dumps}
	return ref, nil
}

// leaseSteps generates n steps, seeded: leases granted with TTLs of 3 to
// 12 s, keys bound to them, moved between them and unbound, a counter
// added to (a double application shows), renewals, revokes, the clock
// moved past deadlines (expiries with no write after them, and before a
// write), restarts across deadlines, and operations on leases that have
// ended, which the store must refuse.
func leaseSteps(n int, seed uint64) []LeaseStep {
	rng := rand.New(rand.NewPCG(seed, 0x1ea5e))
	m := newLeaseModel(0)
	keys := []string{"a", "b", "c", "d"}
	var steps []LeaseStep
	liveLeases := func() []int {
		var out []int
		for i, l := range m.leases {
			if l.live {
				out = append(out, i)
			}
		}
		return out
	}
	for len(steps) < n {
		var s LeaseStep
		live := liveLeases()
		switch r := rng.IntN(100); {
		case r < 15 || len(live) == 0:
			s = LeaseStep{Op: "grant", TTL: time.Duration(3+rng.IntN(10)) * time.Second, Advance: time.Duration(rng.IntN(2)) * time.Second}
		case r < 40:
			s = LeaseStep{Op: "put-lease", Key: keys[rng.IntN(len(keys))], Lease: live[rng.IntN(len(live))]}
		case r < 48:
			s = LeaseStep{Op: "put", Key: keys[rng.IntN(len(keys))]}
		case r < 58:
			s = LeaseStep{Op: "add", Key: "n", Delta: int64(1 + rng.IntN(9))}
		case r < 62:
			s = LeaseStep{Op: "del", Key: keys[rng.IntN(len(keys))]}
		case r < 72:
			s = LeaseStep{Op: "keepalive", Lease: live[rng.IntN(len(live))], Advance: time.Duration(rng.IntN(3)) * time.Second}
		case r < 77:
			s = LeaseStep{Op: "revoke", Lease: live[rng.IntN(len(live))]}
		case r < 85:
			// Past the earliest deadline: the store's timer expires it.
			s = LeaseStep{Op: "wait", Advance: m.earliest() - m.now + time.Duration(rng.IntN(2))*time.Second}
		case r < 90:
			// A restart past a deadline: the open expires it.
			s = LeaseStep{Op: "put", Key: keys[rng.IntN(len(keys))], Restart: true,
				Advance: m.earliest() - m.now + time.Duration(rng.IntN(3))*time.Second}
		case r < 94:
			// A write right at a deadline: the expiry comes first.
			s = LeaseStep{Op: "add", Key: "n", Delta: 1, Advance: m.earliest() - m.now}
		default:
			// An operation on a lease that has ended: refused.
			var ended []int
			for i, l := range m.leases {
				if !l.live {
					ended = append(ended, i)
				}
			}
			if len(ended) == 0 {
				continue
			}
			op := []string{"put-lease", "keepalive", "revoke"}[rng.IntN(3)]
			s = LeaseStep{Op: op, Key: "a", Lease: ended[rng.IntN(len(ended))]}
		}
		if s.Op == "put" || s.Op == "put-lease" {
			s.Value = strconv.Itoa(len(steps))
		}
		m.step(s)
		steps = append(steps, s)
	}
	return steps
}

// earliest returns the earliest deadline of a live lease, or now.
func (m *leaseModel) earliest() time.Duration {
	e := time.Duration(-1)
	for _, l := range m.leases {
		if l.live && (e < 0 || l.deadline < e) {
			e = l.deadline
		}
	}
	if e < 0 {
		return m.now
	}
	return e
}

// leaseProgram runs the steps one at a time on a clock of its own, and
// records each step's outcome: acknowledged at the revision of its last
// record, or refused. A wait step waits until the store has committed the
// expiries the reference says the clock's move causes (the checker's
// reference, used here only to know how long to wait: a store that never
// commits them fails the program). After a failed write the program
// stops: the checker then looks at the crash states after the failure.
func leaseProgram(steps []LeaseStep) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		clk := fakeclock.New(leaseT0)
		opts.Clock = clk
		s, err := kv.Open(dir, &opts)
		if err != nil {
			return err
		}
		defer func() { s.Close() }()
		m := newLeaseModel(s.Revision())
		var ids []kv.LeaseID
		id := func(i int) kv.LeaseID {
			if i < len(ids) {
				return ids[i]
			}
			return 1 << 62 // a lease never granted
		}
		for i, st := range steps {
			n := i + 1
			m.step(st)
			want := m.rev0 + record.Revision(m.records)
			rec.Issue(n)
			if st.Restart {
				if err := s.Close(); err != nil {
					return fmt.Errorf("step %d (%s): close: %w", n, st, err)
				}
			}
			clk.Advance(st.Advance)
			if st.Restart {
				if s, err = kv.Open(dir, &opts); err != nil {
					return fmt.Errorf("step %d (%s): reopen: %w", n, st, err)
				}
			}
			var rev kv.Revision
			switch st.Op {
			case "wait":
				if err := waitRevision(s, want); err != nil {
					return fmt.Errorf("step %d (%s): %w", n, st, err)
				}
				rev = want
			case "grant":
				var l kv.LeaseID
				l, err = s.Grant(st.TTL)
				ids = append(ids, l)
				rev = kv.Revision(l)
			case "put-lease":
				rev, err = s.PutLease([]byte(st.Key), []byte(st.Value), id(st.Lease))
			case "put":
				rev, err = s.Put([]byte(st.Key), []byte(st.Value))
			case "add":
				_, rev, err = s.Add([]byte(st.Key), st.Delta)
			case "del":
				rev, _, err = s.Submit(kv.DeleteOp([]byte(st.Key))).Wait()
			case "keepalive":
				_, err = s.KeepAlive(id(st.Lease))
				rev = s.Revision()
			case "revoke":
				rev, err = s.Revoke(id(st.Lease))
			}
			// checkOutcomes holds each outcome against the reference's
			// (commits, at which revision).
			switch {
			case errors.Is(err, kv.ErrFailed):
				return fmt.Errorf("step %d (%s): %w", n, st, err)
			case err != nil:
				rec.Refused(n, err.Error())
			default:
				rec.AckRev(n, uint64(rev))
			}
		}
		return s.Close()
	}
}

// waitRevision waits until the store's revision is rev: the expiries its
// timer commits. A store that has failed (the trace of a failing sync
// fails the timer's commit) will never get there: its failure is the
// answer at once. One that does not get there in 10 s fails.
func waitRevision(s *kv.Store, rev kv.Revision) error {
	for start := time.Now(); s.Revision() < rev; time.Sleep(100 * time.Microsecond) {
		if err := s.Err(); err != nil {
			return err
		}
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("the store is at revision %d, 10 s after its clock passed deadlines that take it to %d", s.Revision(), rev)
		}
	}
	return nil
}
