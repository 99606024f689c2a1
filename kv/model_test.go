package kv_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"pgregory.net/rapid"
)

// The model test drives a store with random sequences of operations,
// reopens and power losses, and compares every result, and the whole map
// after every step, with a plain Go model. Small segments and checkpoint
// thresholds make rotations and background checkpoints happen within a
// few steps. The machine reports a mismatch as an error, so that the same
// actions can run under rapid (TestModel) and under a plain random driver
// on the store's bug variants (TestModelCatchesBugs).

// mEntry is a key's state in the model.
type mEntry struct {
	Value     string
	CreateRev kv.Revision
	ModRev    kv.Revision
	Version   int64
}

// mState is the model: the map and the revision of the last committed
// record.
type mState struct {
	Rev  kv.Revision
	Keys map[string]mEntry
}

// sameError returns nil when got is the error the model predicts (want is
// one of the kv sentinels, or nil).
func sameError(want, got error) error {
	if want == nil && got == nil {
		return nil
	}
	if want != nil && errors.Is(got, want) {
		return nil
	}
	return fmt.Errorf("error %v, model says %v", got, want)
}

// apply applies ops at revision rev to keys, in order, each seeing the
// ones before, and returns the new map; it returns an error, and the map
// unchanged, when an add cannot apply.
func apply(keys map[string]mEntry, ops []kv.Op, rev kv.Revision) (map[string]mEntry, error) {
	next := make(map[string]mEntry, len(keys)+len(ops))
	for k, e := range keys {
		next[k] = e
	}
	for _, op := range ops {
		k := string(op.Key)
		old, exists := next[k]
		var value string
		switch {
		case op.Kind == record.KindDelete:
			delete(next, k)
			continue
		case op.Kind == record.KindPut:
			value = string(op.Value)
		default: // add
			var n int64
			if exists {
				var err error
				if n, err = strconv.ParseInt(old.Value, 10, 64); err != nil {
					return keys, kv.ErrNotInteger
				}
			}
			sum := n + op.Delta
			if (op.Delta > 0 && sum < n) || (op.Delta < 0 && sum > n) {
				return keys, kv.ErrOverflow
			}
			value = strconv.FormatInt(sum, 10)
		}
		e := mEntry{Value: value, CreateRev: rev, ModRev: rev, Version: 1}
		if exists {
			e.CreateRev, e.Version = old.CreateRev, old.Version+1
		}
		next[k] = e
	}
	return next, nil
}

// holds evaluates c against the model's entry of its key.
func (s mState) holds(c kv.Compare) bool {
	e, ok := s.Keys[string(c.Key)]
	rel := func(sign int) bool {
		switch c.Cmp {
		case kv.Equal:
			return sign == 0
		case kv.NotEqual:
			return sign != 0
		case kv.Less:
			return sign < 0
		case kv.Greater:
			return sign > 0
		}
		panic("unknown relation")
	}
	var n int64
	switch c.Target {
	case record.TargetValue:
		if !ok {
			return c.Cmp == kv.NotEqual
		}
		return rel(strings.Compare(e.Value, string(c.Value)))
	case record.TargetExists:
		if ok {
			n = 1
		}
	case record.TargetModRev:
		n = int64(e.ModRev)
	case record.TargetCreateRev:
		n = int64(e.CreateRev)
	case record.TargetVersion:
		n = e.Version
	}
	switch {
	case n < c.Num:
		return rel(-1)
	case n > c.Num:
		return rel(1)
	}
	return rel(0)
}

// drawer is the source of random choices: rapid's (which shrinks) or a
// plain generator's.
type drawer interface {
	// intn returns a number in [0, n).
	intn(n int, label string) int
}

type rapidDrawer struct{ t *rapid.T }

func (d rapidDrawer) intn(n int, label string) int { return rapid.IntRange(0, n-1).Draw(d.t, label) }

type randDrawer struct{ r *rand.Rand }

func (d randDrawer) intn(n int, _ string) int { return d.r.IntN(n) }

// mKeys share prefixes, and two are all 0xff bytes, the case where a
// prefix has no upper bound.
var mKeys = []string{"a", "a/1", "a/2", "ab", "b", "b\x00", "\xff", "\xff\xff"}

var mPrefixes = []string{"", "a", "a/", "ab", "b", "c", "\xff", "\xff\xff", "\xff\xff\xff"}

func drawKey(d drawer) string { return mKeys[d.intn(len(mKeys), "key")] }

// drawValue returns a value from 0 bytes to a few KiB: integers (some at
// the edge of int64, some that strconv parses in an unusual spelling),
// short strings, and long ones.
func drawValue(d drawer) string {
	switch d.intn(6, "value kind") {
	case 0, 1:
		return strconv.Itoa(d.intn(41, "int") - 20)
	case 2:
		special := []string{"", "9223372036854775807", "-9223372036854775808", "007", "+3", "-0", " 1", "1e3", "x"}
		return special[d.intn(len(special), "special")]
	case 3:
		return "s" + strconv.Itoa(d.intn(4, "short"))
	}
	n := d.intn(4097, "length")
	head := "v" + strconv.Itoa(d.intn(100, "head")) + ":"
	return head + strings.Repeat(string(rune('a'+d.intn(26, "fill"))), max(0, n-len(head)))
}

func drawDelta(d drawer) int64 {
	switch d.intn(10, "delta kind") {
	case 0:
		return math.MaxInt64
	case 1:
		return math.MinInt64
	}
	return int64(d.intn(11, "delta") - 5)
}

func drawOps(d drawer, label string) []kv.Op {
	ops := make([]kv.Op, d.intn(4, label))
	for i := range ops {
		k := []byte(drawKey(d))
		switch d.intn(3, "op") {
		case 0:
			ops[i] = kv.PutOp(k, []byte(drawValue(d)))
		case 1:
			ops[i] = kv.DeleteOp(k)
		default:
			ops[i] = kv.AddOp(k, drawDelta(d))
		}
	}
	return ops
}

var mCmps = []kv.Cmp{kv.Equal, kv.NotEqual, kv.Less, kv.Greater}

// drawRev returns a revision near the key's: often the current one, so
// that compares hold as often as not.
func drawRev(d drawer, cur kv.Revision, label string) kv.Revision {
	switch d.intn(3, label) {
	case 0:
		return cur
	case 1:
		return cur + 1
	}
	return kv.Revision(d.intn(6, label+" small"))
}

func (m *machine) drawCompare(d drawer) kv.Compare {
	ks := drawKey(d)
	k, e := []byte(ks), m.model.Keys[ks]
	c := mCmps[d.intn(len(mCmps), "cmp")]
	switch d.intn(6, "target") {
	case 0:
		v := e.Value
		if d.intn(2, "current value") == 0 {
			v = drawValue(d)
		}
		return kv.CompareValue(k, c, []byte(v))
	case 1:
		return kv.CompareModRev(k, c, drawRev(d, e.ModRev, "mod rev"))
	case 2:
		return kv.CompareCreateRev(k, c, drawRev(d, e.CreateRev, "create rev"))
	case 3:
		return kv.CompareVersion(k, c, int64(drawRev(d, kv.Revision(e.Version), "version")))
	case 4:
		return kv.Exists(k)
	}
	return kv.Absent(k)
}

// machine is the store under test and its model.
type machine struct {
	opts  kv.Options
	bug   variant.Bug // a bug variant the store runs with
	mem   *vfs.MemFS
	s     *kv.Store
	model mState
	// since are the states a power loss may go back to: under Always the
	// current one only; under Never and Interval every state since the
	// last point where the log was known durable (Sync, Checkpoint, Close
	// or a recovery).
	since []mState
	cov   *coverage
}

// coverage counts what the random runs reached, so that a test can fail
// when they stop reaching it.
type coverage struct {
	runs, crashes, reopens, checkpoints int
	rotations                           int // writes acknowledged after the first segment
	crashLostWrites                     int
	txnThen, txnElse, txnFailed, fenced int
}

func newMachine(opts kv.Options, cov *coverage) (*machine, error) {
	return newMachineBug(opts, variant.None, cov)
}

func newMachineBug(opts kv.Options, bug variant.Bug, cov *coverage) (*machine, error) {
	m := &machine{opts: opts, bug: bug, mem: vfs.NewMem(), model: mState{Keys: map[string]mEntry{}}, cov: cov}
	m.since = []mState{m.model}
	m.opts.FS = variant.Wrap(m.mem, m.bug)
	s, err := kv.Open("/data", &m.opts)
	if err != nil {
		return nil, err
	}
	m.s = s
	cov.runs++
	return m, nil
}

// drawOptions draws small segments and checkpoint thresholds so that
// rotations and background checkpoints happen, and the sync mode: mostly
// Always; under Never and Interval a power loss may take back the writes
// since the log was last known durable, but only as a suffix.
func drawOptions(d drawer) kv.Options {
	o := kv.Options{
		SegmentSize:     int64([]int{1 << 10, 2 << 10, 4 << 10}[d.intn(3, "segment size")]),
		CheckpointBytes: int64([]int{2 << 10, 8 << 10, 32 << 10, -1}[d.intn(4, "checkpoint bytes")]),
		NoPreallocate:   d.intn(2, "no preallocate") == 0,
	}
	switch d.intn(6, "sync") {
	case 0:
		o.Sync = kv.Never
	case 1:
		o.Sync = kv.Interval(time.Millisecond)
	}
	return o
}

func (m *machine) close() {
	if m.s != nil {
		m.cov.checkpoints += int(m.s.Stats().Checkpoints)
		m.s.Close()
		m.s = nil
	}
}

// committed records a new model state after a write at rev.
func (m *machine) committed(keys map[string]mEntry, rev kv.Revision) error {
	if rev != m.model.Rev+1 {
		return fmt.Errorf("committed at revision %d, model expects %d", rev, m.model.Rev+1)
	}
	m.model = mState{Rev: rev, Keys: keys}
	if m.opts.Sync == kv.Always {
		m.since = m.since[:0]
	}
	m.since = append(m.since, m.model)
	if st := m.s.Stats(); st.Segment > 1 {
		m.cov.rotations++
	}
	return nil
}

// durable marks the current state as surviving any power loss.
func (m *machine) durable() { m.since = append(m.since[:0], m.model) }

// noCommit checks that a failed write left the revision alone.
func (m *machine) noCommit(rev kv.Revision) error {
	if got := m.s.Revision(); got != m.model.Rev {
		return fmt.Errorf("a write that committed nothing moved the revision from %d to %d", m.model.Rev, got)
	}
	if rev != 0 {
		return fmt.Errorf("a write that committed nothing returned revision %d", rev)
	}
	return nil
}

func (m *machine) put(d drawer) error {
	k, v := drawKey(d), drawValue(d)
	rev, err := m.s.Put([]byte(k), []byte(v))
	if err != nil {
		return fmt.Errorf("put %q (%d bytes): %w", k, len(v), err)
	}
	keys, _ := apply(m.model.Keys, []kv.Op{kv.PutOp([]byte(k), []byte(v))}, m.model.Rev+1)
	return m.committed(keys, rev)
}

func (m *machine) del(d drawer) error {
	k := drawKey(d)
	rev, err := m.s.Delete([]byte(k))
	if _, ok := m.model.Keys[k]; !ok {
		if e := sameError(kv.ErrNotFound, err); e != nil {
			return fmt.Errorf("delete %q: %w", k, e)
		}
		return m.noCommit(rev)
	}
	if err != nil {
		return fmt.Errorf("delete %q: %w", k, err)
	}
	keys, _ := apply(m.model.Keys, []kv.Op{kv.DeleteOp([]byte(k))}, m.model.Rev+1)
	return m.committed(keys, rev)
}

func (m *machine) add(d drawer) error {
	k, delta := drawKey(d), drawDelta(d)
	n, rev, err := m.s.Add([]byte(k), delta)
	keys, merr := apply(m.model.Keys, []kv.Op{kv.AddOp([]byte(k), delta)}, m.model.Rev+1)
	if e := sameError(merr, err); e != nil {
		return fmt.Errorf("add %q %d (value %q): %w", k, delta, m.model.Keys[k].Value, e)
	}
	if merr != nil {
		return m.noCommit(rev)
	}
	if want := keys[k].Value; strconv.FormatInt(n, 10) != want {
		return fmt.Errorf("add %q %d returned %d, model says %s", k, delta, n, want)
	}
	return m.committed(keys, rev)
}

// txn runs a transaction, plain or fenced: a fence whose key is missing
// or whose revision is not the token fails it with ErrFenced.
func (m *machine) txn(d drawer) error {
	t := kv.Txn{If: make([]kv.Compare, d.intn(4, "compares"))}
	for i := range t.If {
		t.If[i] = m.drawCompare(d)
	}
	t.Then, t.Else = drawOps(d, "then"), drawOps(d, "else")
	fenceOK := true
	var fence *kv.Fence
	if d.intn(4, "fenced") == 0 {
		fk := drawKey(d)
		e, ok := m.model.Keys[fk]
		f := kv.Fence{Key: []byte(fk), By: kv.FenceBy(d.intn(2, "fence by"))}
		cur := e.CreateRev
		if f.By == kv.FenceModRev {
			cur = e.ModRev
		}
		f.Token = drawRev(d, cur, "token")
		fenceOK = ok && f.Token == cur
		fence = &f
	}
	var res kv.TxnResult
	var err error
	if fence != nil {
		res, err = m.s.Fenced(*fence).Txn(t)
	} else {
		res, err = m.s.Txn(t)
	}
	desc := fmt.Sprintf("txn %s", describeTxn(t, fence))
	var want error
	ok := true
	for _, c := range t.If {
		ok = ok && m.model.holds(c)
	}
	ops := t.Then
	if !ok {
		ops = t.Else
	}
	keys := m.model.Keys
	switch {
	case fence == nil && len(t.If) == 0 && len(t.Then) == 0 && len(t.Else) == 0:
		want = kv.ErrInvalid
	case !fenceOK:
		want = kv.ErrFenced
		m.cov.fenced++
	default:
		keys, want = apply(m.model.Keys, ops, m.model.Rev+1)
	}
	if e := sameError(want, err); e != nil {
		return fmt.Errorf("%s: %w", desc, e)
	}
	if want != nil {
		m.cov.txnFailed++
		if res.Committed {
			return fmt.Errorf("%s failed with %v but reports a commit", desc, err)
		}
		return m.noCommit(0)
	}
	if res.Succeeded != ok {
		return fmt.Errorf("%s: succeeded %v, model says %v", desc, res.Succeeded, ok)
	}
	if ok {
		m.cov.txnThen++
	} else {
		m.cov.txnElse++
	}
	if len(ops) == 0 {
		if res.Committed || res.Revision != m.model.Rev {
			return fmt.Errorf("%s: empty branch gave %+v, want revision %d uncommitted", desc, res, m.model.Rev)
		}
		return m.noCommit(0)
	}
	if !res.Committed {
		return fmt.Errorf("%s: %d operations not committed: %+v", desc, len(ops), res)
	}
	return m.committed(keys, res.Revision)
}

func describeTxn(t kv.Txn, f *kv.Fence) string {
	var b strings.Builder
	short := func(v []byte) string {
		if len(v) > 12 {
			return fmt.Sprintf("%q…(%d)", v[:12], len(v))
		}
		return fmt.Sprintf("%q", v)
	}
	if f != nil {
		fmt.Fprintf(&b, "fence %q by %d = %d; ", f.Key, f.By, f.Token)
	}
	for _, c := range t.If {
		fmt.Fprintf(&b, "if %q t%d c%d %s/%d; ", c.Key, c.Target, c.Cmp, short(c.Value), c.Num)
	}
	for name, ops := range map[string][]kv.Op{"then": t.Then, "else": t.Else} {
		for _, op := range ops {
			fmt.Fprintf(&b, "%s k%d %q %s %d; ", name, op.Kind, op.Key, short(op.Value), op.Delta)
		}
	}
	return b.String()
}

// fencedWrite is a plain write through a FencedWriter.
func (m *machine) fencedWrite(d drawer) error {
	fk := drawKey(d)
	e, exists := m.model.Keys[fk]
	f := kv.Fence{Key: []byte(fk), Token: drawRev(d, e.CreateRev, "token")}
	fw := m.s.Fenced(f)
	k := drawKey(d)
	var op kv.Op
	var rev kv.Revision
	var n int64
	var err error
	switch d.intn(3, "fenced op") {
	case 0:
		op = kv.PutOp([]byte(k), []byte(drawValue(d)))
		rev, err = fw.Put(op.Key, op.Value)
	case 1:
		op = kv.DeleteOp([]byte(k))
		rev, err = fw.Delete(op.Key)
	default:
		op = kv.AddOp([]byte(k), drawDelta(d))
		n, rev, err = fw.Add(op.Key, op.Delta)
	}
	desc := fmt.Sprintf("fenced (%q = %d, created %d) op %d on %q", fk, f.Token, e.CreateRev, op.Kind, k)
	var want error
	keys := m.model.Keys
	_, present := m.model.Keys[k]
	switch {
	case !exists || e.CreateRev != f.Token:
		want = kv.ErrFenced
		m.cov.fenced++
	case op.Kind == record.KindDelete && !present:
		want = kv.ErrNotFound
	default:
		keys, want = apply(m.model.Keys, []kv.Op{op}, m.model.Rev+1)
	}
	if e := sameError(want, err); e != nil {
		return fmt.Errorf("%s: %w", desc, e)
	}
	if want != nil {
		return m.noCommit(rev)
	}
	if op.Kind == record.KindAdd && strconv.FormatInt(n, 10) != keys[k].Value {
		return fmt.Errorf("%s returned %d, model says %s", desc, n, keys[k].Value)
	}
	return m.committed(keys, rev)
}

func (m *machine) get(d drawer) error {
	k := drawKey(d)
	e, err := m.s.Get([]byte(k))
	want, ok := m.model.Keys[k]
	if !ok {
		if ee := sameError(kv.ErrNotFound, err); ee != nil {
			return fmt.Errorf("get %q: %w", k, ee)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %q: %w", k, err)
	}
	if string(e.Key) != k {
		return fmt.Errorf("get %q returned key %q", k, e.Key)
	}
	got := mEntry{Value: string(e.Value), CreateRev: e.CreateRev, ModRev: e.ModRev, Version: e.Version}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("get %q (-model +store):\n%s", k, diff)
	}
	return nil
}

type mKV struct {
	Key   string
	Entry mEntry
}

func collect(s *kv.Store, start, end []byte) []mKV {
	var out []mKV
	for e := range s.Scan(start, end) {
		out = append(out, mKV{string(e.Key), mEntry{string(e.Value), e.CreateRev, e.ModRev, e.Version}})
	}
	return out
}

// modelRange returns the model's entries with key in [start, end) (no
// upper bound when !hasEnd), sorted.
func (s mState) modelRange(start, end string, hasEnd bool) []mKV {
	var out []mKV
	for k, e := range s.Keys {
		if k >= start && (!hasEnd || k < end) {
			out = append(out, mKV{k, e})
		}
	}
	slices.SortFunc(out, func(a, b mKV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func (m *machine) scanPrefix(d drawer) error {
	p := mPrefixes[d.intn(len(mPrefixes), "prefix")]
	var got []mKV
	for e := range m.s.ScanPrefix([]byte(p)) {
		got = append(got, mKV{string(e.Key), mEntry{string(e.Value), e.CreateRev, e.ModRev, e.Version}})
	}
	var want []mKV
	for _, e := range m.model.modelRange("", "", false) {
		if strings.HasPrefix(e.Key, p) {
			want = append(want, e)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("scan prefix %q (-model +store):\n%s", p, diff)
	}
	return nil
}

func (m *machine) scanRange(d drawer) error {
	bounds := append([]string{""}, mKeys...)
	start := bounds[d.intn(len(bounds), "start")]
	end, hasEnd := bounds[d.intn(len(bounds), "end")], d.intn(4, "no end") != 0
	var endb []byte
	if hasEnd {
		endb = []byte(end)
	}
	got := collect(m.s, []byte(start), endb)
	want := m.model.modelRange(start, end, hasEnd)
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("scan [%q, %q) (end %v) (-model +store):\n%s", start, end, hasEnd, diff)
	}
	return nil
}

func (m *machine) checkpoint(drawer) error {
	if err := m.s.Checkpoint(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	m.durable()
	return nil
}

func (m *machine) sync(drawer) error {
	if err := m.s.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	m.durable()
	return nil
}

func (m *machine) reopen(drawer) error {
	m.cov.checkpoints += int(m.s.Stats().Checkpoints)
	if err := m.s.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	m.durable()
	s, err := kv.Open("/data", &m.opts)
	if err != nil {
		m.s = nil
		return fmt.Errorf("reopen after close: %w", err)
	}
	m.s = s
	m.cov.reopens++
	return m.compareAll("after reopen")
}

// crash opens the store on the state a power loss leaves now: under
// Always every acknowledged write is in it; under Never and Interval it
// is one of the states since the log was last known durable. Revisions then continue
// from the recovered one.
func (m *machine) crash(drawer) error {
	clone := m.mem.CrashClone()
	m.cov.checkpoints += int(m.s.Stats().Checkpoints)
	m.s.Close()
	m.mem = clone
	m.opts.FS = variant.Wrap(clone, m.bug)
	s, err := kv.Open("/data", &m.opts)
	if err != nil {
		m.s = nil
		return fmt.Errorf("recovery after power loss: %w", err)
	}
	m.s = s
	m.cov.crashes++
	rev := s.Revision()
	i := slices.IndexFunc(m.since, func(st mState) bool { return st.Rev == rev })
	if i < 0 {
		return fmt.Errorf("recovered revision %d, model allows %d..%d", rev, m.since[0].Rev, m.model.Rev)
	}
	if rev < m.model.Rev {
		m.cov.crashLostWrites++
	}
	m.model = m.since[i]
	m.durable()
	return m.compareAll("after power loss")
}

// compareAll compares the whole map and the revision with the model.
func (m *machine) compareAll(when string) error {
	if got := m.s.Revision(); got != m.model.Rev {
		return fmt.Errorf("%s: revision %d, model %d", when, got, m.model.Rev)
	}
	if diff := cmp.Diff(m.model.modelRange("", "", false), collect(m.s, nil, nil)); diff != "" {
		return fmt.Errorf("%s: map (-model +store):\n%s", when, diff)
	}
	return nil
}

// check holds after every step.
func (m *machine) check() error {
	if got, want := m.s.Len(), len(m.model.Keys); got != want {
		return fmt.Errorf("Len %d, model %d", got, want)
	}
	st := m.s.Stats()
	if st.Keys != len(m.model.Keys) || st.Revision != m.model.Rev {
		return fmt.Errorf("Stats keys %d revision %d, model %d %d", st.Keys, st.Revision, len(m.model.Keys), m.model.Rev)
	}
	if st.Failed != nil {
		return fmt.Errorf("store failed: %v", st.Failed)
	}
	return m.compareAll("")
}

// mActions are the machine's actions; writes appear twice so that rapid,
// which picks actions uniformly, draws them more often.
var mActions = []struct {
	name string
	do   func(*machine, drawer) error
}{
	{"put", (*machine).put},
	{"put2", (*machine).put},
	{"delete", (*machine).del},
	{"add", (*machine).add},
	{"txn", (*machine).txn},
	{"txn2", (*machine).txn},
	{"fenced", (*machine).fencedWrite},
	{"get", (*machine).get},
	{"scan prefix", (*machine).scanPrefix},
	{"scan range", (*machine).scanRange},
	{"checkpoint", (*machine).checkpoint},
	{"sync", (*machine).sync},
	{"reopen", (*machine).reopen},
	{"power loss", (*machine).crash},
}

// noFailFile keeps rapid from writing testdata/rapid/ on a failure; the
// seed it prints reproduces the failure (-rapid.seed=N). -rapid.nofailfile
// or -rapid.failfile on the command line still win.
func noFailFile(t *testing.T) {
	set := false
	flag.Visit(func(f *flag.Flag) {
		set = set || strings.HasPrefix(f.Name, "rapid.") && strings.Contains(f.Name, "failfile")
	})
	f := flag.Lookup("rapid.nofailfile")
	if set || f == nil {
		return
	}
	old := f.Value.String()
	f.Value.Set("true")
	t.Cleanup(func() { f.Value.Set(old) })
}

func TestModel(t *testing.T) {
	noFailFile(t)
	cov := &coverage{}
	rapid.Check(t, func(rt *rapid.T) {
		d := rapidDrawer{rt}
		m, err := newMachine(drawOptions(d), cov)
		if err != nil {
			rt.Fatal(err)
		}
		defer m.close()
		actions := map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				if err := m.check(); err != nil {
					rt.Fatal(err)
				}
			},
		}
		for _, a := range mActions {
			actions[a.name] = func(rt *rapid.T) {
				if err := a.do(m, rapidDrawer{rt}); err != nil {
					rt.Fatal(err)
				}
			}
		}
		rt.Repeat(actions)
	})
	t.Logf("coverage: %+v", *cov)
	if t.Failed() {
		return
	}
	// The runs must reach what they are meant to test. A power loss that
	// takes back acknowledged writes needs Never or Interval (a run in
	// six), a write and a power loss with no sync between: the random
	// runs reach it only now and then (they missed it in about one test
	// run in 70), so forcedLoss makes it happen.
	for name, n := range map[string]int{
		"power losses": cov.crashes, "reopens": cov.reopens, "checkpoints": cov.checkpoints,
		"rotations":       cov.rotations,
		"successful txns": cov.txnThen, "else txns": cov.txnElse, "failed txns": cov.txnFailed, "fenced-off writes": cov.fenced,
	} {
		if n == 0 {
			t.Errorf("no %s in %d runs", name, cov.runs)
		}
	}
	for _, mode := range []kv.SyncMode{kv.Never, kv.Interval(time.Hour)} {
		if err := forcedLoss(mode, cov); err != nil {
			t.Errorf("%v: %v", mode, err)
		}
	}
	if cov.crashLostWrites == 0 {
		t.Error("no power loss under Never or Interval lost acknowledged writes")
	}
}

// forcedLoss runs the machine's actions in an order that makes a power
// loss take back acknowledged writes, as the random runs do now and then:
// under mode (which syncs only when asked), writes, a Sync, more writes,
// a power loss. The machine must accept the loss (the store went back to
// the state at the Sync, which its model allows) and count it, and the
// store must then go on from there.
func forcedLoss(mode kv.SyncMode, cov *coverage) error {
	d := randDrawer{rand.New(rand.NewPCG(7, 0))}
	m, err := newMachine(kv.Options{Sync: mode, CheckpointBytes: -1}, cov)
	if err != nil {
		return err
	}
	defer m.close()
	lost := cov.crashLostWrites
	steps := []struct {
		name string
		do   func(*machine, drawer) error
	}{
		{"put", (*machine).put}, {"add", (*machine).add}, {"sync", (*machine).sync},
		{"put", (*machine).put}, {"add", (*machine).add}, {"txn", (*machine).txn},
		{"power loss", (*machine).crash}, {"put", (*machine).put}, {"get", (*machine).get},
	}
	var synced kv.Revision
	for _, st := range steps {
		if err := st.do(m, d); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		if err := m.check(); err != nil {
			return fmt.Errorf("after %s: %w", st.name, err)
		}
		switch st.name {
		case "sync":
			synced = m.model.Rev
		case "power loss":
			if m.model.Rev != synced {
				return fmt.Errorf("the power loss recovered revision %d, want %d: the writes since the sync are only in the page cache", m.model.Rev, synced)
			}
		}
	}
	if cov.crashLostWrites == lost {
		return errors.New("the power loss was not counted as losing writes")
	}
	return nil
}

// runRandom runs steps random actions on a fresh machine and returns the
// first mismatch.
func runRandom(seed uint64, opts kv.Options, bug variant.Bug, steps int) error {
	d := randDrawer{rand.New(rand.NewPCG(seed, 0))}
	m, err := newMachineBug(opts, bug, &coverage{})
	if err != nil {
		return err
	}
	defer m.close()
	for range steps {
		a := mActions[d.intn(len(mActions), "action")]
		if err := a.do(m, d); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		if m.s == nil {
			return errors.New("store not open")
		}
		if err := m.check(); err != nil {
			return fmt.Errorf("after %s: %w", a.name, err)
		}
	}
	return nil
}

// TestModelCatchesBugs runs the model's actions on the store's bug
// variants: the model must find each within a few random runs, and the
// same runs must pass on the correct store.
func TestModelCatchesBugs(t *testing.T) {
	const runs, steps = 20, 60
	opts := kv.Options{SegmentSize: 2 << 10, CheckpointBytes: 8 << 10}
	for _, bug := range []variant.Bug{variant.None, variant.NoSync, variant.DoubleApply} {
		name := string(bug)
		if bug == variant.None {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			caught := 0
			for seed := range uint64(runs) {
				err := runRandom(seed, opts, bug, steps)
				if err != nil {
					if bug == variant.None {
						t.Fatalf("seed %d: %v", seed, err)
					}
					if caught == 0 {
						t.Logf("seed %d: %v", seed, err)
					}
					caught++
				}
			}
			if bug != variant.None && caught == 0 {
				t.Errorf("the model caught bug %q in none of %d runs", bug, runs)
			}
			t.Logf("%d of %d runs caught it", caught, runs)
		})
	}
}
