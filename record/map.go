package record

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/google/btree"

	"github.com/kvstore/kv/internal/mem"
)

// The modes of a Map.
//
// A Map is in one of six modes, which its fields tell apart (own is true
// in the mode called tracked here). The package's tests check this table
// after their operations (checkInvariants, in invariants_test.go):
//
//	mode           idx   t     pending  own    entered by
//	ordered        set   set   nil      false  NewMap; Build; a Flush that finds the pending tree built
//	deferred       set   nil   nil      false  Defer of a map that holds keys
//	tracked        set   nil   nil      true   Defer of an empty map (a recovery's; "deferred while empty")
//	pending        set   nil   set      false  BuildAsync of a map of tuning.asyncBuildMin keys or more
//	clone          nil   set   nil      false  Clone; the first use of a pending clone
//	pending clone  nil   nil   set      false  Clone of a pending map whose tree is not built yet
//
// Deferred and tracked maps leave Build for a tree built from the index
// (tracked: from the entries tracked), or BuildAsync for pending; Defer
// makes a pending map wait for its tree first. The other fields belong to
// some modes only:
//
//   - later: the changes the tree has yet to take. Ordered: LoadLater,
//     DeleteLater and evacuations; pending: every change since
//     BuildAsync. Flush gives each its key's current state from the
//     index, so order and repeats do not matter. A deferred map drops
//     what it holds at the next Flush (Build reads the index); a clone
//     has none.
//   - fix: a pending clone's only: the map's later, resolved when the
//     clone was taken, for the tree it builds on first use.
//   - tracked, sorted, deadTracked: a tracked map's only: every entry
//     written since Defer, the dead ones with version 0 (markDead), for
//     Build to sort.
//   - ahead, nAhead: a tracked map's only: entries Load put in the arena
//     but not yet in the index, tracked or counted in bytes.
//   - ev, evOff (evacuating): any mode with an index. Each change copies
//     evacuateStep more live entries of ev out; the copies go to later
//     (ordered, pending), to tracked (tracked), or nowhere (deferred).
//
// The rules that hold across modes:
//
//  1. settle runs first. Every method but Load calls settle before it
//     reads or changes the index, the tree or the counts, so that the
//     entries Load left ahead are in the index (Revision, SetRevision,
//     Prefetch and UnflushedForTesting read nothing they change). An evacuation
//     runs only after settle, since it takes an entry the index does not
//     point to for dead.
//  2. The index is never behind: it takes every change at once; only the
//     tree lags (later, pending, or none while deferred or tracked).
//  3. Entries change in place only in a tracked map, which no one else
//     reads: a put of a value of the same length, and markDead.
//  4. A clone shares its entries with the map it came from and never
//     evacuates; its own changes go to its own arena.

// Entry is a key's state. A Map never modifies the bytes an Entry it hands
// out points to (but see Defer), so an Entry obtained from a Map, or from
// a clone of it, stays valid.
type Entry struct {
	Key       []byte
	Value     []byte
	CreateRev Revision // revision that created the key
	ModRev    Revision // revision that last changed it
	Version   int64    // number of changes since creation, 1 when created
}

func keyPrefix(k []byte) uint64 {
	var p [8]byte
	copy(p[:], k)
	return binary.BigEndian.Uint64(p[:])
}

// Map is the store's state: keys ordered by their bytes, and the revision
// of the last record applied. Its entries live in an arena (see arena.go);
// a hash index serves point lookups and an ordered tree serves scans. It
// is not safe for concurrent writers; a Clone is cheap (copy-on-write) and
// may be read while the original changes.
//
// Its modes (ordered, deferred, tracked, pending, clone) and the rules
// that hold across them are in the table at the top of map.go.
//
// Entries a Map returns are copies of its state whose Key and Value point
// into the arena: they stay valid and unchanged for as long as they are
// held (except those of a map deferred while empty, see Defer), and they
// keep their arena chunk (up to 1 MiB) in memory while they are.
type Map struct {
	a   arena
	idx *index                  // nil in a clone, which has only the tree
	t   *btree.BTreeG[sortItem] // nil while deferred (see Defer) or pending
	// pending is the tree being built by BuildAsync, while t is nil.
	pending *pendingTree
	// later holds the entries changed in idx by LoadLater, DeleteLater,
	// evacuations and any change while pending, but not yet in t (see
	// Flush).
	later []ref
	// fix holds, in a clone taken while pending, the changes its tree
	// must take once built: later, resolved when the clone was taken.
	fix   []change
	rev   Revision
	bytes int64 // sum of key and value lengths
	own   bool  // deferred while empty (mode tracked): values may change in place
	// tracked holds the entries written while own, sorted up to sorted,
	// for Build.
	tracked []sortItem
	sorted  int
	// deadTracked is how many of the entries tracked were marked dead.
	deadTracked int
	// ev is the chunk being evacuated, its entries before evOff copied
	// out (see maybeCompact).
	ev    *chunk
	evOff int
	// ahead holds the first nAhead entries Load put in the arena of a map
	// deferred while empty, their insertion in the index left for settle.
	ahead  [loadAhead]aheadEntry
	nAhead int
}

// loadAhead is how many loaded entries wait for their index insertion.
const loadAhead = 16

// aheadEntry is an entry loaded whose insertion in the index waits: p at
// loc, its key's hash h.
type aheadEntry struct {
	p   ref
	loc uint64
	h   uint64
}

// NewMap returns an empty map at revision 0.
func NewMap() *Map { return newMap(&defaultTuning) }

// newMap returns an empty map with the given tuning.
func newMap(tu *tuning) *Map {
	m := &Map{t: newTree(), a: arena{tune: tu}}
	m.idx = newIndex(&m.a, 0)
	return m
}

// tuning is a map's sizes and thresholds, shared by its arena, its index
// and its clones. The store's maps use defaultTuning; the package's tests
// make maps with others (tiny chunks, every dead byte worth an
// evacuation, trees that stay pending) so that the rare paths run within
// a few operations. Nothing changes a tuning once a map has it, but for
// the tests' buildGate.
type tuning struct {
	minChunk, maxChunk, ownChunk int   // see defaultMinChunk and the others
	storedHashSlots              int   // see defaultStoredHashSlots
	compactMin                   int64 // see defaultCompactMin
	evacuateStep                 int   // see defaultEvacuateStep
	asyncBuildMin                int   // see defaultAsyncBuildMin
	// buildGate, when not nil, holds the goroutines BuildAsync starts
	// until it is closed: the tests keep trees pending across changes
	// with it.
	buildGate chan struct{}
}

// defaultTuning is the tuning of every map NewMap makes. It is never
// changed.
var defaultTuning = tuning{
	minChunk:        defaultMinChunk,
	maxChunk:        defaultMaxChunk,
	ownChunk:        defaultOwnChunk,
	storedHashSlots: defaultStoredHashSlots,
	compactMin:      defaultCompactMin,
	evacuateStep:    defaultEvacuateStep,
	asyncBuildMin:   defaultAsyncBuildMin,
}

// degree is the ordered tree's B-tree degree.
const degree = 32

func newTree() *btree.BTreeG[sortItem] { return btree.NewG(degree, lessItems) }

// Defer stops maintaining the ordered tree until Build: Apply, Load, Get
// and Delete then cost a hash-index operation each, which is what
// replaying a long log wants. All and Clone build the tree first.
//
// A map deferred while empty is its owner's alone until Build: Apply then
// overwrites in place the value of a key that a put gives a value of the
// same length, rather than appending a new version, so entries obtained
// from it must not be kept past the next Apply. (Recovery owns its map
// until Build; every other user sees entries that never change.) Build
// then sorts only the entries that were not loaded in key order (a
// snapshot's are).
func (m *Map) Defer() {
	m.settle()
	if m.pending != nil {
		m.Build()
	}
	if m.idx != nil {
		m.own = m.t != nil && m.idx.live == 0 || m.own
		m.t = nil
	}
}

// Build rebuilds the ordered tree after Defer, inserting the keys in
// order, which keeps the tree's hot path in cache. After BuildAsync, it
// waits for the tree being built.
func (m *Map) Build() {
	m.build(false)
	p := m.pending
	if p == nil {
		return
	}
	m.pending = nil
	m.t = p.tree()
	for _, c := range m.fix {
		if c.cur != nil {
			m.t.ReplaceOrInsert(itemOf(c.cur))
		} else {
			m.t.Delete(itemOf(c.p))
		}
	}
	m.fix = nil
	// A map's own later changes go in at the next Flush.
}

// defaultAsyncBuildMin is the number of keys below which BuildAsync
// builds the tree at once: a goroutine is not worth it.
const defaultAsyncBuildMin = 64 << 10

// BuildAsync is Build on a goroutine of its own: the map may be used
// while the tree is built, point lookups and changes at their usual cost
// (a change the tree has yet to take waits in later), and what needs the
// key order (All, Clone's tree, Build) waits for it. So a recovery can
// hand over its map once the hash index is complete, the tree's cost on
// the other core. Changes wait until BuildAsync for a map deferred while
// empty (see Defer): its entries stop changing in place.
func (m *Map) BuildAsync() { m.build(true) }

// build starts building the tree, on a goroutine of its own if async and
// the map is big enough.
func (m *Map) build(async bool) {
	m.settle()
	if m.t != nil || m.pending != nil || m.idx == nil {
		return
	}
	var items []sortItem
	sorted, tracked := 0, false
	if m.own {
		m.own = false
		// The entries tracked, less those marked dead, are the keys: the
		// dead are left out where the tree is built.
		if len(m.tracked)-m.deadTracked == m.idx.live {
			items, sorted, tracked = m.tracked, m.sorted, true
		}
		m.tracked, m.sorted, m.deadTracked = nil, 0, 0
	}
	if !tracked {
		items = make([]sortItem, 0, m.idx.live)
		mem.PopulateSlice(items)
		m.idx.all(func(p ref) {
			items = append(items, itemOf(p))
		})
	}
	job := func() *btree.BTreeG[sortItem] {
		if !tracked {
			return buildSorted(items, 0)
		}
		return buildSorted(liveOnly(items, sorted))
	}
	if !async || len(items) < m.a.tune.asyncBuildMin {
		m.t = job()
		return
	}
	p := &pendingTree{done: make(chan struct{})}
	m.pending = p
	gate := m.a.tune.buildGate
	go func() {
		if gate != nil {
			<-gate
		}
		// It reads only the keys and versions of the entries in items,
		// which nothing changes (the map is no longer own).
		p.t = job()
		close(p.done)
	}()
}

// pendingTree is a tree being built by BuildAsync.
type pendingTree struct {
	done chan struct{} // closed once t is built
	// mu serializes clones of t (a clone writes t's copy-on-write
	// bookkeeping): the map and each clone taken while pending get one.
	mu sync.Mutex
	t  *btree.BTreeG[sortItem] // never changed once built
}

// ready reports whether the tree is built.
func (p *pendingTree) ready() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tree waits for the tree to be built and returns a clone of it.
func (p *pendingTree) tree() *btree.BTreeG[sortItem] {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.t.Clone()
}

// change is an entry that changed while a tree was pending, with its
// key's entry when a clone was taken (nil: deleted).
type change struct{ p, cur ref }

// sortItem is an entry and the first 8 bytes of its key, which order most
// pairs of keys without reading the entries: the items of the ordered tree
// and of its build. A comparison that reads an entry is a cache miss or
// two on a tree far bigger than the cache, and an insertion into a tree
// of a million makes about twenty comparisons: with the prefix beside
// the pointer, those of keys that differ in their first 8 bytes read
// nothing else (a bulk load of random 16-byte keys spent 30% of its time
// reading entries' keys in the tree's comparisons without it).
type sortItem struct {
	prefix uint64
	p      ref
}

// itemOf returns p's item.
func itemOf(p ref) sortItem { return sortItem{keyPrefix(refKey(p)), p} }

// probeItem returns an item to look key up with.
func probeItem(key []byte) sortItem { return sortItem{keyPrefix(key), probe(key)} }

func lessItems(a, b sortItem) bool { return compareItems(a, b) < 0 }

func compareItems(a, b sortItem) int {
	if a.prefix != b.prefix {
		return cmp.Compare(a.prefix, b.prefix)
	}
	return bytes.Compare(refKey(a.p), refKey(b.p))
}

// track notes p, a new entry of a map deferred while empty, for Build:
// the entries come in the order they were written, and a snapshot writes
// them in key order, so the first run of them is sorted already.
func (m *Map) track(p ref) {
	it := sortItem{keyPrefix(refKey(p)), p}
	if n := len(m.tracked); m.sorted == n && (n == 0 || compareItems(m.tracked[n-1], it) < 0) {
		m.sorted++
	}
	if n := len(m.tracked); n == cap(m.tracked) {
		// Grown by hand: doubled, not by append's quarter for big slices,
		// and populated before the copy (see mem.Populate).
		grown := make([]sortItem, n, max(2*n, 1024))
		mem.PopulateSlice(grown)
		copy(grown, m.tracked)
		m.tracked = grown
	}
	m.tracked = append(m.tracked, it)
}

// liveOnly returns the entries of items that are live (see markDead),
// of which the first sorted are in key order, and how many of those live
// ones are.
func liveOnly(items []sortItem, sorted int) ([]sortItem, int) {
	n, head := 0, 0
	for i, it := range items {
		if isDead(it.p) {
			continue
		}
		if i < sorted {
			head++
		}
		items[n] = it
		n++
	}
	return items[:n], head
}

// buildSorted builds a tree of the entries in items, of which the first
// head are in key order: it sorts the rest and merges the two.
func buildSorted(items []sortItem, head int) *btree.BTreeG[sortItem] {
	n := len(items)
	slices.SortFunc(items[head:], compareItems)
	b := newBuilder()
	i, j := 0, head
	for i < head || j < n {
		if j == n || (i < head && compareItems(items[i], items[j]) < 0) {
			b.add(items[i])
			i++
		} else {
			b.add(items[j])
			j++
		}
	}
	return b.done()
}

// markDead marks the entry at p, of a map deferred while empty, replaced
// or deleted: its version becomes 0, which no live entry has. Nobody else
// holds the map's entries then. Each entry tracked is marked at most once
// (a dead one is in the index no longer), so deadTracked counts the dead.
func (m *Map) markDead(p ref) {
	clear(bytesAt(p, 16, 8))
	m.deadTracked++
}

func isDead(p ref) bool { return binary.LittleEndian.Uint64(bytesAt(p, 16, 8)) == 0 }

// builder makes a tree from refs given in ascending key order. The one
// being inserted is greater than every key in the tree: top lets the
// tree's comparisons with it answer without reading a key, where each
// would otherwise cost a cache miss or two on an entry inserted long
// before.
type builder struct {
	o *buildOrder
	t *btree.BTreeG[sortItem]
}

func newBuilder() builder {
	o := &buildOrder{}
	return builder{o, btree.NewG(degree, o.less)}
}

func (b builder) add(it sortItem) {
	b.o.top = it.p
	b.t.ReplaceOrInsert(it)
}

func (b builder) done() *btree.BTreeG[sortItem] {
	b.o.top = nil
	return b.t
}

// buildOrder is the order of a tree made by a builder: lessItems, except
// that while the builder runs, top is greater than everything else.
type buildOrder struct{ top ref }

func (o *buildOrder) less(a, b sortItem) bool {
	if o.top != nil {
		if a.p == o.top {
			return false
		}
		if b.p == o.top {
			return true
		}
	}
	return lessItems(a, b)
}

// ordered brings the tree up to date with the index.
func (m *Map) ordered() {
	m.Build()
	m.Flush()
}

// LoadLater is Load for the hash index now and the ordered tree at the
// next Flush, Clone or All: a writer that must make a change visible to
// point lookups quickly can leave the tree's insertion for later.
func (m *Map) LoadLater(e *Entry) {
	m.settle()
	if m.idx == nil || m.t == nil {
		m.Load(e)
		return
	}
	p, loc := m.a.put(e.Key, e.Value, e.CreateRev, e.ModRev, e.Version)
	m.account(m.idx.set(p, loc), p)
	m.later = append(m.later, p)
	m.maybeCompact()
}

// DeleteLater is Delete for the hash index now and the ordered tree at
// the next Flush, Clone or All.
func (m *Map) DeleteLater(key []byte) {
	m.settle()
	if m.idx == nil || m.t == nil {
		m.Delete(key)
		return
	}
	if old := m.idx.remove(key); old != nil {
		m.account(old, nil)
		m.later = append(m.later, old)
		m.maybeCompact()
	}
}

// UnflushedForTesting returns the number of changes LoadLater, DeleteLater and
// evacuations left for the ordered tree, which the next Flush takes in.
func (m *Map) UnflushedForTesting() int { return len(m.later) }

// Flush applies the changes LoadLater and DeleteLater left for the
// ordered tree: each key changed gets its current state from the index.
func (m *Map) Flush() { m.FlushSome(math.MaxInt) }

// FlushSome is Flush for at most n of the waiting changes, so that a
// caller holding a lock can let go of it between parts. It returns the
// number a further call would take in; 0 also while the changes wait for
// a tree BuildAsync has not finished. Each change takes its key's
// current state, so the changes may go in any order.
func (m *Map) FlushSome(n int) int {
	m.settle()
	if m.t == nil {
		if m.pending == nil {
			m.later = m.later[:0] // Build reads the index
			return 0
		}
		if !m.pending.ready() {
			return 0 // later waits for the tree
		}
		m.Build()
	}
	k := max(len(m.later)-n, 0)
	for _, p := range m.later[k:] {
		if cur := m.idx.get(refKey(p)); cur != nil {
			m.t.ReplaceOrInsert(itemOf(cur))
		} else {
			m.t.Delete(itemOf(p))
		}
	}
	clear(m.later[k:])
	m.later = m.later[:k]
	return k
}

// Reserve sizes an empty map's hash index for n keys, as when loading a
// snapshot whose entry count is known: an index grown by doubling can hold
// twice the slots it needs. Callers bound n by what the input can hold.
func (m *Map) Reserve(n int) {
	m.settle()
	if m.idx != nil && m.idx.live == 0 && n > 0 {
		m.idx.resize(n)
		if m.own && len(m.tracked) == 0 {
			m.tracked = make([]sortItem, 0, n)
			mem.PopulateSlice(m.tracked)
		}
	}
}

// Revision returns the revision of the last record applied.
func (m *Map) Revision() Revision { return m.rev }

// SetRevision sets the revision, as when a map is loaded from a snapshot.
func (m *Map) SetRevision(r Revision) { m.rev = r }

// Len returns the number of keys.
func (m *Map) Len() int {
	m.settle()
	if m.idx != nil {
		return m.idx.live
	}
	m.Build() // a clone taken while pending
	return m.t.Len()
}

// Bytes returns the total length of keys and values.
func (m *Map) Bytes() int64 {
	m.settle()
	return m.bytes
}

// Clone returns a copy-on-write copy of m's tree: a view for ordered
// reads (All, Get, Len) that later changes to m do not affect. Changes to
// the clone do not affect m.
func (m *Map) Clone() *Map {
	m.settle()
	if p := m.pending; p != nil && !p.ready() && m.idx != nil {
		// The clone builds its tree from the pending one when first
		// used, with the changes made since, resolved now.
		c := &Map{a: arena{tune: m.a.tune}, pending: p, rev: m.rev, bytes: m.bytes, fix: make([]change, len(m.later))}
		for i, q := range m.later {
			c.fix[i] = change{q, m.idx.get(refKey(q))}
		}
		return c
	}
	m.ordered()
	return &Map{a: arena{tune: m.a.tune}, t: m.t.Clone(), rev: m.rev, bytes: m.bytes}
}

// find returns the ref of key, or nil.
func (m *Map) find(key []byte) ref {
	m.settle()
	if m.idx != nil {
		return m.idx.get(key)
	}
	m.Build() // a clone taken while pending
	it, _ := m.t.Get(probeItem(key))
	return it.p
}

// Get returns the entry of key.
func (m *Map) Get(key []byte) (*Entry, bool) {
	p := m.find(key)
	if p == nil {
		return nil, false
	}
	e := refEntry(p)
	return &e, true
}

// Lookup is Get returning the entry by value, which allocates nothing.
func (m *Map) Lookup(key []byte) (Entry, bool) {
	p := m.find(key)
	if p == nil {
		return Entry{}, false
	}
	return refEntry(p), true
}

// Load inserts a copy of e, as when loading a snapshot.
//
// In a map deferred while empty, as a recovery's, the insertion of an
// entry in the hash index waits until loadAhead more have come, or until
// any other use of the map: Load reads the entry's index slot at once,
// and by the time the entry goes in, the slot is in the cache. The index
// of a million keys is far bigger than the cache, so each insertion
// costs a cache miss, and a dozen misses waited for together cost little
// more than one.
func (m *Map) Load(e *Entry) {
	p, loc := m.a.put(e.Key, e.Value, e.CreateRev, e.ModRev, e.Version)
	if !m.own {
		m.settle()
		m.insert(p, loc)
		return
	}
	h := m.idx.hash(e.Key)
	m.idx.prefetch(h)
	m.ahead[m.nAhead] = aheadEntry{p, loc, h}
	if m.nAhead++; m.nAhead == loadAhead {
		m.settle()
	}
}

// applyAhead is how many operations ahead of the one it applies Apply
// prefetches the index slot of.
const applyAhead = 8

// Prefetch starts loading into the cache the index slot where a lookup of
// key starts, and returns at once. In a map of a million keys each lookup
// costs a cache miss or two; prefetching the keys to be applied a few
// ahead of the one being applied overlaps their misses, as recovery does
// for the records of the log and Apply for the operations of a record.
func (m *Map) Prefetch(key []byte) {
	if m.idx != nil {
		m.idx.prefetch(m.idx.hash(key))
	}
}

// settle inserts in the index the entries Load left waiting. Every use of
// the map but Load calls it first.
func (m *Map) settle() {
	n := m.nAhead
	if n == 0 {
		return
	}
	m.nAhead = 0
	for i := range n {
		a := &m.ahead[i]
		old := m.idx.setHashed(a.p, a.loc, a.h)
		m.track(a.p) // the map is own: no tree
		m.account(old, a.p)
	}
	clear(m.ahead[:n])
	// Only now, every entry loaded being in the index: an evacuation
	// takes an entry its index does not point to for dead.
	for range n {
		m.maybeCompact()
	}
}

// insert makes p (at loc) its key's entry, in the index and the tree.
func (m *Map) insert(p ref, loc uint64) {
	m.settle()
	var old ref
	if m.idx != nil {
		old = m.idx.set(p, loc)
	} else {
		m.Build() // a clone taken while pending
	}
	if m.own {
		m.track(p)
	}
	if m.t != nil {
		if o, ok := m.t.ReplaceOrInsert(itemOf(p)); ok && m.idx == nil {
			old = o.p // the index, when there is one, is never behind the tree
		}
	} else if m.pending != nil {
		m.later = append(m.later, p)
	}
	m.account(old, p)
	m.maybeCompact()
}

// account updates the byte counts for old replaced by p (either nil).
func (m *Map) account(old, p ref) {
	if old != nil {
		m.bytes -= int64(refKeyLen(old) + refValueLen(old))
		m.a.kill(old)
		if m.own {
			m.markDead(old)
		}
	}
	if p != nil {
		m.bytes += int64(refKeyLen(p) + refValueLen(p))
	}
}

// AppendRange appends to buf the first n entries with start <= key < end
// in key order (a nil end: no upper bound), fewer only when there are no
// more, and returns buf. Their Key and Value stay valid. A caller walking
// a range in steps (a merge, which a pulled iterator would make pay a
// goroutine switch an entry) goes on from just after the last key it got.
func (m *Map) AppendRange(buf []Entry, start, end []byte, n int) []Entry {
	m.ordered()
	if n <= 0 {
		return buf
	}
	m.t.AscendGreaterOrEqual(probeItem(start), func(it sortItem) bool {
		e := refEntry(it.p)
		if end != nil && bytes.Compare(e.Key, end) >= 0 {
			return false
		}
		buf = append(buf, e)
		n--
		return n > 0
	})
	return buf
}

// All returns the entries with start <= key < end in key order; a nil end
// means no upper bound. The *Entry yielded is reused from one step to the
// next, so that a scan of a million keys allocates nothing: copy *e to
// keep it (its Key and Value stay valid).
func (m *Map) All(start, end []byte) iter.Seq[*Entry] {
	m.ordered()
	t := m.t
	return func(yield func(*Entry) bool) {
		var e Entry
		t.AscendGreaterOrEqual(probeItem(start), func(it sortItem) bool {
			e = refEntry(it.p)
			if end != nil && bytes.Compare(e.Key, end) >= 0 {
				return false
			}
			return yield(&e)
		})
	}
}

// Apply applies r atomically: either every operation takes effect and the
// map's revision becomes r.Revision, or Apply returns an error (wrapping
// ErrNotInteger or ErrOverflow) and the map is unchanged. Apply does not
// check that r.Revision follows the map's revision; callers do.
func (m *Map) Apply(r *Record) error {
	m.settle()
	if len(r.Ops) == 1 || !hasAdd(r.Ops) {
		// One op applies or fails whole; puts and deletes cannot fail, so
		// a record of them applies in order, each seeing the ones before,
		// with no staging (a bulk load's records hold thousands of them).
		for i := range r.Ops {
			if j := i + applyAhead; j < len(r.Ops) {
				m.Prefetch(r.Ops[j].Key)
			}
			if err := m.applyOp(&r.Ops[i], r.Revision); err != nil {
				return err
			}
		}
		m.rev = r.Revision
		return nil
	}
	// Stage the results so that a failing op leaves the map untouched, and
	// so that later ops see the effect of earlier ones.
	staged := make(map[string]*Entry, len(r.Ops))
	order := make([]string, 0, len(r.Ops))
	for i := range r.Ops {
		e, err := Next(m.current(r.Ops[i].Key, staged), &r.Ops[i], r.Revision)
		if err != nil {
			return err
		}
		k := string(r.Ops[i].Key)
		if _, ok := staged[k]; !ok {
			order = append(order, k)
		}
		staged[k] = e
	}
	for _, k := range order {
		if e := staged[k]; e != nil {
			m.Load(e)
		} else {
			m.Delete([]byte(k))
		}
	}
	m.rev = r.Revision
	return nil
}

// applyOp applies one operation at revision rev, or fails with the map
// unchanged.
func (m *Map) applyOp(op *Op, rev Revision) error {
	if op.Kind == KindDelete {
		m.Delete(op.Key)
		return nil
	}
	var old ref
	slot := -1
	if m.idx != nil {
		if slot = m.idx.find(op.Key); slot >= 0 {
			old = m.idx.refAt(slot)
		}
	} else {
		old = m.find(op.Key)
	}
	if m.own && old != nil && op.Kind == KindPut && refValueLen(old) == len(op.Value) {
		// Deferred: nobody else holds this entry, so the replay's
		// overwrites allocate nothing and change no index slot.
		kl := refKeyLen(old)
		copy(bytesAt(old, 32+kl, len(op.Value)), op.Value)
		h := bytesAt(old, 0, 24)
		binary.LittleEndian.PutUint64(h[8:], uint64(rev))
		binary.LittleEndian.PutUint64(h[16:], binary.LittleEndian.Uint64(h[16:])+1)
		return nil
	}
	var prev *Entry
	var pe Entry
	if old != nil {
		pe = refEntry(old)
		prev = &pe
	}
	var digits [20]byte
	value, err := nextValue(prev, op, digits[:0])
	if err != nil {
		return err
	}
	create, version := rev, int64(1)
	if prev != nil {
		create, version = prev.CreateRev, prev.Version+1
	}
	p, loc := m.a.put(op.Key, value, create, rev, version)
	if slot >= 0 {
		m.idx.setAt(slot, loc)
	} else if m.idx != nil {
		m.idx.insert(p, loc)
	}
	if m.own {
		m.track(p)
	}
	if m.t != nil {
		m.t.ReplaceOrInsert(itemOf(p))
	} else if m.pending != nil {
		m.later = append(m.later, p)
	}
	m.account(old, p)
	m.maybeCompact()
	return nil
}

// hasAdd reports whether ops holds an add, the one kind of operation that
// can fail on the state it finds, or a kind Next does not know.
func hasAdd(ops []Op) bool {
	for i := range ops {
		if k := ops[i].Kind; k != KindPut && k != KindDelete {
			return true
		}
	}
	return false
}

// current returns the entry of key as seen after the staged changes.
func (m *Map) current(key []byte, staged map[string]*Entry) *Entry {
	if staged != nil {
		if e, ok := staged[string(key)]; ok {
			return e // nil when deleted earlier in the same record
		}
	}
	e, _ := m.Get(key)
	return e
}

// nextValue returns the value op (a put or an add) gives a key whose entry
// is old (nil when absent); an add's digits are appended to buf.
func nextValue(old *Entry, op *Op, buf []byte) ([]byte, error) {
	switch op.Kind {
	case KindPut:
		return op.Value, nil
	case KindAdd:
		var n int64
		if old != nil {
			var err error
			n, err = ParseInt(old.Value)
			if err != nil {
				return nil, fmt.Errorf("add %q: %w", old.Key, err)
			}
		}
		if (op.Delta > 0 && n > math.MaxInt64-op.Delta) || (op.Delta < 0 && n < math.MinInt64-op.Delta) {
			return nil, fmt.Errorf("add %q: %d + %d: %w", op.Key, n, op.Delta, ErrOverflow)
		}
		return strconv.AppendInt(buf, n+op.Delta, 10), nil
	}
	return nil, fmt.Errorf("%w: unknown operation kind %d", ErrCorrupt, uint8(op.Kind))
}

// Next returns the entry of op.Key after op is applied at revision rev to
// old, the key's entry before (nil when absent). A nil result means the
// key is deleted. It returns an error wrapping ErrNotInteger or
// ErrOverflow when an add cannot apply. The entry's key and value share
// one new allocation.
func Next(old *Entry, op *Op, rev Revision) (*Entry, error) {
	if op.Kind == KindDelete {
		return nil, nil
	}
	e := new(Entry)
	if _, _, err := NextInto(e, make([]byte, 0, len(op.Key)+max(len(op.Value), 20)), old, op, rev); err != nil {
		return nil, err
	}
	return e, nil
}

// NextInto is Next writing the new entry into dst, its key and value
// appended to buf, and returning buf: a writer that stages many changes
// can reuse both. deleted reports a delete, which leaves dst and buf as
// they were.
func NextInto(dst *Entry, buf []byte, old *Entry, op *Op, rev Revision) (deleted bool, _ []byte, err error) {
	if op.Kind == KindDelete {
		return true, buf, nil
	}
	var digits [20]byte
	v, err := nextValue(old, op, digits[:0])
	if err != nil {
		return false, buf, err
	}
	l := len(buf)
	buf = append(append(buf, op.Key...), v...)
	k := l + len(op.Key)
	*dst = Entry{Key: buf[l:k:k], Value: buf[k:len(buf):len(buf)], CreateRev: rev, ModRev: rev, Version: 1}
	if old != nil {
		dst.CreateRev = old.CreateRev
		dst.Version = old.Version + 1
	}
	return false, buf, nil
}

// Delete removes key, as Apply does for a delete operation.
func (m *Map) Delete(key []byte) {
	m.settle()
	var old ref
	if m.idx != nil {
		old = m.idx.remove(key)
	} else {
		m.Build() // a clone taken while pending
	}
	switch {
	case m.t == nil:
		if m.pending != nil && old != nil {
			m.later = append(m.later, old)
		}
	case m.idx == nil:
		o, _ := m.t.Delete(probeItem(key))
		old = o.p
	case old != nil:
		m.t.Delete(itemOf(old))
	}
	m.account(old, nil)
	m.maybeCompact()
}

// Evacuation: the defaults of tuning.compactMin and evacuateStep.
const (
	// defaultCompactMin is the dead space below which a map never
	// evacuates a chunk.
	defaultCompactMin = 256 << 10
	// defaultEvacuateStep is how many entries of a chunk being evacuated
	// one change copies out.
	defaultEvacuateStep = 32
)

// maybeCompact moves on the evacuation of the chunk of the arena with the
// most dead bytes (versions replaced or deleted), which starts when the
// dead bytes outgrow half the live ones: the arena then holds at most 1.5
// times its live entries (plus compactMin and the chunks being filled and
// evacuated). The chunk chosen is at least a third dead, so each byte
// written costs at most two copied; each change copies at most
// evacuateStep entries, a short pause, where a whole chunk of 1 MiB in
// one change was a long one (bench/RESULTS.md, "The arena").
func (m *Map) maybeCompact() {
	if m.idx == nil {
		return // a clone shares its entries with the map it came from
	}
	if m.ev == nil {
		a := &m.a
		if a.dead <= a.tune.compactMin || a.dead <= a.live/2 {
			return
		}
		i := a.victim()
		if i < 0 {
			return
		}
		m.ev, m.evOff = a.chunks[i], 0
	}
	m.evacuate(m.a.tune.evacuateStep)
}

// evacuate copies up to n more entries of the chunk being evacuated, the
// live ones, to the chunk being filled, and points the index and the tree
// at the copies (the tree at the next Flush). Past the last, it lets the chunk go: it stays in memory
// for as long as a clone, an entry handed out or a pending Flush refers to
// it, and nothing in it changes.
func (m *Map) evacuate(n int) {
	c := m.ev
	for ; n > 0 && m.evOff < len(c.b); n-- {
		p := ref(&c.b[m.evOff])
		size := refSize(p)
		m.evOff += size
		j := m.idx.find(refKey(p))
		if j < 0 || m.idx.locAt(j) != locOf(c, p) {
			continue // dead
		}
		m.a.moved(c, size)
		q, loc := m.a.copyOf(p)
		m.idx.setAt(j, loc)
		if m.t != nil || m.pending != nil {
			// As LoadLater: the tree catches up at the next Flush, off
			// the writer's path when a flusher calls it.
			m.later = append(m.later, q)
		}
		if m.own {
			m.markDead(p)
			m.track(q)
		}
	}
	if m.evOff >= len(c.b) {
		// The copies may have added chunks, which moves c in the list.
		m.a.drop(m.a.chunkOf(ref(unsafe.SliceData(c.b))))
		m.ev = nil
	}
	if len(m.later) >= maxLater {
		m.Flush() // for a writer that never flushes
	}
}

// maxLater bounds the changes an evacuation leaves for Flush.
const maxLater = 4 << 10

// ParseInt parses a value as the decimal int64 that add works on.
func ParseInt(v []byte) (int64, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", v, ErrNotInteger)
	}
	return n, nil
}
