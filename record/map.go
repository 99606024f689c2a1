package record

import (
	"bytes"
	"fmt"
	"iter"
	"math"
	"strconv"

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

func lessEntry(a, b *Entry) bool { return bytes.Compare(a.Key, b.Key) < 0 }

// Map is the store's state: keys ordered by their bytes, and the revision
// of the last record applied. It is not safe for concurrent writers; a
// Clone is cheap (copy-on-write) and may be read while the original
// changes.
type Map struct {
	t     *btree.BTreeG[*Entry]
	rev   Revision
	bytes int64 // sum of key and value lengths
}

// NewMap returns an empty map at revision 0.
func NewMap() *Map { return &Map{t: btree.NewG(32, lessEntry)} }

// Revision returns the revision of the last record applied.
func (m *Map) Revision() Revision { return m.rev }

// SetRevision sets the revision, as when a map is loaded from a snapshot.
func (m *Map) SetRevision(r Revision) { m.rev = r }

// Len returns the number of keys.
func (m *Map) Len() int { return m.t.Len() }

// Bytes returns the total length of keys and values.
func (m *Map) Bytes() int64 { return m.bytes }

// Clone returns a copy-on-write copy of m.
func (m *Map) Clone() *Map { return &Map{t: m.t.Clone(), rev: m.rev, bytes: m.bytes} }

// Get returns the entry of key.
func (m *Map) Get(key []byte) (*Entry, bool) {
	return m.t.Get(&Entry{Key: key})
}

// Load inserts e as it is, as when loading a snapshot. e must not be
// modified afterwards.
func (m *Map) Load(e *Entry) {
	if old, ok := m.t.ReplaceOrInsert(e); ok {
		m.bytes -= int64(len(old.Key) + len(old.Value))
	}
	m.bytes += int64(len(e.Key) + len(e.Value))
}

// All returns the entries with start <= key < end in key order; a nil end
// means no upper bound.
func (m *Map) All(start, end []byte) iter.Seq[*Entry] {
	return func(yield func(*Entry) bool) {
		m.t.AscendGreaterOrEqual(&Entry{Key: start}, func(e *Entry) bool {
			if end != nil && bytes.Compare(e.Key, end) >= 0 {
				return false
			}
			return yield(e)
		})
	}
}

// Apply applies r atomically: either every operation takes effect and the
// map's revision becomes r.Revision, or Apply returns an error (wrapping
// ErrNotInteger or ErrOverflow) and the map is unchanged. Apply does not
// check that r.Revision follows the map's revision; callers do.
func (m *Map) Apply(r *Record) error {
	if len(r.Ops) == 1 {
		e, err := Next(m.current(r.Ops[0].Key, nil), &r.Ops[0], r.Revision)
		if err != nil {
			return err
		}
		m.set(r.Ops[0].Key, e)
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
	var value []byte
	switch op.Kind {
	case KindDelete:
		return nil, nil
	case KindPut:
		value = bytes.Clone(op.Value)
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
		value = strconv.AppendInt(nil, n+op.Delta, 10)
	default:
		return nil, fmt.Errorf("%w: unknown operation kind %d", ErrCorrupt, uint8(op.Kind))
	}
	e := &Entry{Key: bytes.Clone(op.Key), Value: value, CreateRev: rev, ModRev: rev, Version: 1}
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
	if old, ok := m.t.Delete(&Entry{Key: key}); ok {
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
