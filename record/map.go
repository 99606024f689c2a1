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
	"unsafe"

	"github.com/google/btree"
)

// Entry is a key's state. Entries in a Map are never modified in place, so
// an Entry obtained from a Map, or from a clone of it, stays valid.
type Entry struct {
	Key       []byte
	Value     []byte
	CreateRev Revision // revision that created the key
	ModRev    Revision // revision that last changed it
	Version   int64    // number of changes since creation, 1 when created
}

// item is what the ordered tree holds: the entry. (An 8-byte key prefix
// beside the pointer would save cache misses in comparisons, but at the
// tree's fill it costs 16 bytes a key.)
type item struct {
	e *Entry
}

func itemOf(e *Entry) item { return item{e} }

func keyPrefix(k []byte) uint64 {
	var p [8]byte
	copy(p[:], k)
	return binary.BigEndian.Uint64(p[:])
}

func lessItem(a, b item) bool { return bytes.Compare(a.e.Key, b.e.Key) < 0 }

// Map is the store's state: keys ordered by their bytes, and the revision
// of the last record applied. It keeps a hash index for point lookups next
// to the ordered tree. It is not safe for concurrent writers; a Clone is
// cheap (copy-on-write) and may be read while the original changes.
type Map struct {
	t   *btree.BTreeG[item] // nil while deferred (see Defer)
	idx map[string]*Entry   // nil in a clone, which has only the tree
	// later holds the keys changed in idx by LoadLater and DeleteLater
	// but not yet in t (see Flush).
	later []string
	rev   Revision
	bytes int64 // sum of key and value lengths
}

// NewMap returns an empty map at revision 0.
func NewMap() *Map { return &Map{t: newTree(), idx: map[string]*Entry{}} }

func newTree() *btree.BTreeG[item] { return btree.NewG(32, lessItem) }

// keyString views an entry's key as a string without copying: entry keys
// are never modified.
func keyString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Defer stops maintaining the ordered tree until Build: Apply, Load, Get
// and Delete then cost a hash-map operation each, which is what replaying
// a long log wants. All, Clone and Len build the tree first.
//
// While deferred, Apply changes the entry of a key that a put overwrites
// in place rather than allocating a new version: entries obtained from a
// deferred map must not be kept past the next Apply. (Recovery owns its
// map until Build; every other user sees entries that never change.)
func (m *Map) Defer() {
	if m.idx != nil {
		m.t = nil
	}
}

// Build rebuilds the ordered tree after Defer, inserting the keys in
// order, which keeps the tree's hot path in cache.
func (m *Map) Build() {
	if m.t != nil {
		return
	}
	type sortItem struct {
		prefix uint64
		e      *Entry
	}
	items := make([]sortItem, 0, len(m.idx))
	for _, e := range m.idx {
		items = append(items, sortItem{keyPrefix(e.Key), e})
	}
	slices.SortFunc(items, func(a, b sortItem) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return bytes.Compare(a.e.Key, b.e.Key)
	})
	// The keys go in in ascending order, so the one being inserted is
	// greater than every key in the tree: top lets the tree's comparisons
	// with it answer without reading a key, where each would otherwise
	// cost a cache miss or two on an entry inserted long before.
	o := &buildOrder{}
	m.t = btree.NewG(32, o.less)
	for _, it := range items {
		o.top = it.e
		m.t.ReplaceOrInsert(item{it.e})
	}
	o.top = nil
}

// buildOrder is the order of a tree made by Build: lessItem, except that
// while Build runs, top is greater than everything else.
type buildOrder struct{ top *Entry }

func (o *buildOrder) less(a, b item) bool {
	if o.top != nil {
		if a.e == o.top {
			return false
		}
		if b.e == o.top {
			return true
		}
	}
	return lessItem(a, b)
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
	if m.idx == nil || m.t == nil {
		m.Load(e)
		return
	}
	k := keyString(e.Key)
	old, ok := m.idx[k]
	if ok {
		if unsafe.SliceData(old.Key) != unsafe.SliceData(e.Key) {
			delete(m.idx, k) // as in Load: do not keep old's key alive
		}
		m.bytes -= int64(len(old.Key) + len(old.Value))
	}
	m.idx[k] = e
	m.bytes += int64(len(e.Key) + len(e.Value))
	m.later = append(m.later, k)
}

// DeleteLater is Delete for the hash index now and the ordered tree at
// the next Flush, Clone or All.
func (m *Map) DeleteLater(key []byte) {
	if m.idx == nil || m.t == nil {
		m.Delete(key)
		return
	}
	old, ok := m.idx[string(key)]
	if !ok {
		return
	}
	delete(m.idx, string(key))
	m.bytes -= int64(len(old.Key) + len(old.Value))
	m.later = append(m.later, keyString(old.Key))
}

// Flush applies the changes LoadLater and DeleteLater left for the
// ordered tree: each key changed gets its current state from the index.
func (m *Map) Flush() {
	if m.t == nil {
		m.later = m.later[:0] // Build reads the index
		return
	}
	for _, k := range m.later {
		if e, ok := m.idx[k]; ok {
			m.t.ReplaceOrInsert(item{e})
		} else {
			m.t.Delete(item{&Entry{Key: unsafe.Slice(unsafe.StringData(k), len(k))}})
		}
	}
	clear(m.later)
	m.later = m.later[:0]
}

// Reserve sizes an empty map's hash index for n keys, as when loading a
// snapshot whose entry count is known: an index grown by doubling can hold
// twice the slots it needs. Callers bound n by what the input can hold.
func (m *Map) Reserve(n int) {
	if m.idx != nil && len(m.idx) == 0 && n > 0 {
		m.idx = make(map[string]*Entry, n)
	}
}

// Revision returns the revision of the last record applied.
func (m *Map) Revision() Revision { return m.rev }

// SetRevision sets the revision, as when a map is loaded from a snapshot.
func (m *Map) SetRevision(r Revision) { m.rev = r }

// Len returns the number of keys.
func (m *Map) Len() int {
	if m.idx != nil {
		return len(m.idx)
	}
	return m.t.Len()
}

// Bytes returns the total length of keys and values.
func (m *Map) Bytes() int64 { return m.bytes }

// Clone returns a copy-on-write copy of m's tree: a view for ordered
// reads (All, Get, Len) that later changes to m do not affect. Changes to
// the clone do not affect m.
func (m *Map) Clone() *Map {
	m.ordered()
	return &Map{t: m.t.Clone(), rev: m.rev, bytes: m.bytes}
}

// Get returns the entry of key.
func (m *Map) Get(key []byte) (*Entry, bool) {
	if m.idx != nil {
		e, ok := m.idx[string(key)]
		return e, ok
	}
	it, ok := m.t.Get(item{&Entry{Key: key}})
	return it.e, ok
}

// Load inserts e as it is, as when loading a snapshot. e must not be
// modified afterwards.
func (m *Map) Load(e *Entry) {
	var old *Entry
	var ok bool
	if m.idx != nil {
		old, ok = m.idx[keyString(e.Key)]
		if ok && unsafe.SliceData(old.Key) != unsafe.SliceData(e.Key) {
			// The map's key string is the old entry's key bytes: replace it
			// too, or it would keep the old entry's memory alive. (Next
			// shares the key bytes between versions, so this is rare.)
			delete(m.idx, keyString(e.Key))
		}
		m.idx[keyString(e.Key)] = e
	}
	if m.t != nil {
		var it item
		it, ok = m.t.ReplaceOrInsert(itemOf(e))
		old = it.e
	}
	if ok {
		m.bytes -= int64(len(old.Key) + len(old.Value))
	}
	m.bytes += int64(len(e.Key) + len(e.Value))
}

// All returns the entries with start <= key < end in key order; a nil end
// means no upper bound.
func (m *Map) All(start, end []byte) iter.Seq[*Entry] {
	m.ordered()
	t := m.t
	return func(yield func(*Entry) bool) {
		t.AscendGreaterOrEqual(item{&Entry{Key: start}}, func(it item) bool {
			if end != nil && bytes.Compare(it.e.Key, end) >= 0 {
				return false
			}
			return yield(it.e)
		})
	}
}

// Apply applies r atomically: either every operation takes effect and the
// map's revision becomes r.Revision, or Apply returns an error (wrapping
// ErrNotInteger or ErrOverflow) and the map is unchanged. Apply does not
// check that r.Revision follows the map's revision; callers do.
func (m *Map) Apply(r *Record) error {
	if len(r.Ops) == 1 {
		old := m.current(r.Ops[0].Key, nil)
		if m.overwrite(old, &r.Ops[0], r.Revision) {
			m.rev = r.Revision
			return nil
		}
		e, err := Next(old, &r.Ops[0], r.Revision)
		if err != nil {
			return err
		}
		m.replace(r.Ops[0].Key, old, e)
		m.rev = r.Revision
		return nil
	}
	if !hasAdd(r.Ops) {
		// Puts and deletes cannot fail: apply them in order, each seeing
		// the ones before, with no staging (a bulk load's records hold
		// thousands of them).
		for i := range r.Ops {
			op := &r.Ops[i]
			if op.Kind == KindDelete {
				m.Delete(op.Key)
				continue
			}
			old, _ := m.Get(op.Key)
			if m.overwrite(old, op, r.Revision) {
				continue
			}
			e, err := Next(old, op, r.Revision)
			if err != nil {
				return err // not for a put; kept for safety
			}
			m.replace(op.Key, old, e)
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
		m.set([]byte(k), staged[k])
	}
	m.rev = r.Revision
	return nil
}

// overwrite applies a put to old, the key's entry, in place when the map
// is deferred (see Defer): the replay's overwrites then allocate nothing
// when the value keeps its length, and write no hash-map slot. It reports
// whether it did.
func (m *Map) overwrite(old *Entry, op *Op, rev Revision) bool {
	if m.t != nil || old == nil || op.Kind != KindPut {
		return false
	}
	if len(old.Value) == len(op.Value) {
		copy(old.Value, op.Value)
	} else {
		m.bytes += int64(len(op.Value) - len(old.Value))
		old.Value = bytes.Clone(op.Value)
	}
	old.ModRev = rev
	old.Version++
	return true
}

// replace sets key's entry, old until now, to e (nil: deleted).
func (m *Map) replace(key []byte, old, e *Entry) {
	if e != nil && m.t == nil && (old == nil || unsafe.SliceData(old.Key) == unsafe.SliceData(e.Key)) {
		// The replay fast path: a new key, or a new version sharing its
		// key bytes, into the index alone: one hash-map write.
		m.idx[keyString(e.Key)] = e
		m.bytes += int64(len(e.Key) + len(e.Value))
		if old != nil {
			m.bytes -= int64(len(old.Key) + len(old.Value))
		}
		return
	}
	m.set(key, e)
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

// Next returns the entry of op.Key after op is applied at revision rev to
// old, the key's entry before (nil when absent). A nil result means the
// key is deleted. It returns an error wrapping ErrNotInteger or
// ErrOverflow when an add cannot apply.
func Next(old *Entry, op *Op, rev Revision) (*Entry, error) {
	// Key and value share one allocation of exactly their size.
	var kv []byte
	switch op.Kind {
	case KindDelete:
		return nil, nil
	case KindPut:
		if old != nil {
			// A new version shares the key bytes of the one it replaces.
			return &Entry{Key: old.Key, Value: bytes.Clone(op.Value), CreateRev: old.CreateRev,
				ModRev: rev, Version: old.Version + 1}, nil
		}
		kv = make([]byte, 0, len(op.Key)+len(op.Value))
		kv = append(append(kv, op.Key...), op.Value...)
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
		var digits [20]byte
		d := strconv.AppendInt(digits[:0], n+op.Delta, 10)
		if old != nil {
			return &Entry{Key: old.Key, Value: bytes.Clone(d), CreateRev: old.CreateRev,
				ModRev: rev, Version: old.Version + 1}, nil
		}
		kv = make([]byte, 0, len(op.Key)+len(d))
		kv = append(append(kv, op.Key...), d...)
	default:
		return nil, fmt.Errorf("%w: unknown operation kind %d", ErrCorrupt, uint8(op.Kind))
	}
	k := len(op.Key)
	e := &Entry{Key: kv[:k:k], Value: kv[k:], CreateRev: rev, ModRev: rev, Version: 1}
	if old != nil {
		e.CreateRev = old.CreateRev
		e.Version = old.Version + 1
	}
	return e, nil
}

func (m *Map) set(key []byte, e *Entry) {
	if e == nil {
		m.Delete(key)
		return
	}
	m.Load(e)
}

// Delete removes key, as Apply does for a delete operation.
func (m *Map) Delete(key []byte) {
	var old *Entry
	var ok bool
	if m.idx != nil {
		if old, ok = m.idx[string(key)]; ok {
			delete(m.idx, string(key))
		}
	}
	if m.t != nil {
		var it item
		it, ok = m.t.Delete(item{&Entry{Key: key}})
		old = it.e
	}
	if ok {
		m.bytes -= int64(len(old.Key) + len(old.Value))
	}
}

// ParseInt parses a value as the decimal int64 that add works on.
func ParseInt(v []byte) (int64, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", v, ErrNotInteger)
	}
	return n, nil
}
