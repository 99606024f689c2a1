package layered

import (
	"bytes"
	"errors"
	"fmt"
	"iter"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot/image"
)

// tombstone is the version of a tombstone in the changes: a key the image
// holds, deleted since. No live entry has a version below 1.
const tombstone = -1

// ErrSwap is the error of a Swap that cannot take the image it is given.
var ErrSwap = errors.New("layered: image does not match the frozen view")

// Map is a store's state: the image (nil for none) and the changes since
// it. Its revision is the last record applied, the image's when no
// change is.
type Map struct {
	top  *record.Map
	base *image.Reader
	// newLive counts the live entries of top whose key base lacks; tombs
	// the tombstones of top, each of a key base holds. So the map holds
	// base.Len() + newLive - tombs keys.
	newLive, tombs int

	// since holds the keys changed since Freeze, until Swap or Thaw;
	// frozen is the revision of the frozen view.
	since  map[string]struct{}
	frozen record.Revision

	// Apply's scratch space: the image's entry of a key (got) and the
	// new entry (next).
	got, next []byte
	ne        record.Entry
}

// New returns the map of base (nil: no image) and changes, which holds
// the changes since base: none when base is not nil (changes must be
// empty; its revision becomes base's), or the whole state when it is.
// The map owns both.
func New(changes *record.Map, base *image.Reader) *Map {
	m := &Map{top: changes, base: base}
	if base == nil {
		m.newLive = changes.Len()
	} else {
		changes.SetRevision(base.Revision())
	}
	return m
}

// Base returns the image under the changes, or nil. It is the map's: a
// caller that reads it without the map's owner holding still must be
// ready for image.ErrClosed, which means a Swap closed it meanwhile.
func (m *Map) Base() *image.Reader { return m.base }

// Revision returns the revision of the last record applied.
func (m *Map) Revision() record.Revision { return m.top.Revision() }

// SetRevision sets the revision, as after applying a group of changes.
func (m *Map) SetRevision(r record.Revision) { m.top.SetRevision(r) }

// Len returns the number of keys.
func (m *Map) Len() int {
	n := m.newLive - m.tombs
	if m.base != nil {
		n += m.base.Len()
	}
	return n
}

// ChangedLen returns the number of entries the changes hold, tombstones
// included: what the map holds in memory.
func (m *Map) ChangedLen() int { return m.top.Len() }

// Change returns what the changes hold of key: its entry, or deleted for
// a key deleted since the image; ok is false when they hold nothing of
// it, and the image decides. The entry's bytes stay valid while held.
func (m *Map) Change(key []byte) (e record.Entry, deleted, ok bool) {
	if m.base != nil && m.top.Len() == 0 {
		return record.Entry{}, false, false // nothing changed since the image
	}
	e, ok = m.top.Lookup(key)
	if ok && e.Version == tombstone {
		return record.Entry{}, true, true
	}
	return e, false, ok
}

// Lookup returns the entry of key. One read from the image is a copy,
// valid after the image is closed; damage met there is the image's error
// (snapshot.ErrCorrupt naming file and offset, or vfs.ErrMapFault).
func (m *Map) Lookup(key []byte) (record.Entry, bool, error) {
	e, deleted, ok := m.Change(key)
	if ok || m.base == nil {
		return e, ok && !deleted, nil
	}
	return m.base.Get(key)
}

// inBase reports whether the image holds key.
func (m *Map) inBase(key []byte) (bool, error) {
	if m.base == nil {
		return false, nil
	}
	return m.base.Has(key)
}

// note records that key changed, while a view is frozen.
func (m *Map) note(key []byte) {
	if m.since != nil {
		m.since[string(key)] = struct{}{}
	}
}

// Load sets e as its key's entry (a copy), as a put does. The error is
// the image's, when it cannot tell whether it holds the key; the map is
// then unchanged.
func (m *Map) Load(e *record.Entry) error { return m.put(e, false, unknown) }

// Delete removes key, as a delete does. The error is Load's.
func (m *Map) Delete(key []byte) error { return m.del(key, false, unknown) }

// LoadLater is Load leaving the ordered tree's insertion for later (see
// record.Map.LoadLater and FlushSome), from a writer that knows whether
// the key existed just before this change (it read the key's entry to
// make e): the map then needs no read of the image to keep its count.
func (m *Map) LoadLater(e *record.Entry, existed bool) error {
	return m.put(e, true, knownAs(existed))
}

// DeleteLater is Delete leaving the ordered tree's change for later, from
// a writer that knows whether the key existed just before (LoadLater).
// Only a delete of a key deleted and re-created since the image reads the
// image.
func (m *Map) DeleteLater(key []byte, existed bool) error {
	return m.del(key, true, knownAs(existed))
}

// existence is what a writer knows of whether a key existed just before
// its change.
type existence int8

const (
	unknown existence = iota
	existed
	absent
)

func knownAs(b bool) existence {
	if b {
		return existed
	}
	return absent
}

// baseHolds reports whether the image holds key, a key the changes hold
// nothing of: when they hold nothing, the key has not changed since the
// image (or was created since and deleted again), so it existed just
// before a change exactly when the image holds it; ex says that, when
// known.
func (m *Map) baseHolds(key []byte, ex existence) (bool, error) {
	if ex != unknown {
		return ex == existed, nil
	}
	return m.inBase(key)
}

func (m *Map) put(e *record.Entry, later bool, ex existence) error {
	old, ok := m.top.Get(e.Key)
	switch {
	case ok && old.Version == tombstone:
		m.tombs-- // a key of the image, live again
	case ok:
	default:
		in, err := m.baseHolds(e.Key, ex)
		if err != nil {
			return err
		}
		if !in {
			m.newLive++
		}
	}
	m.note(e.Key)
	if later {
		m.top.LoadLater(e)
	} else {
		m.top.Load(e)
	}
	return nil
}

func (m *Map) del(key []byte, later bool, ex existence) error {
	old, ok := m.top.Get(key)
	if ok && old.Version == tombstone {
		return nil // deleted already
	}
	var in bool
	var err error
	switch {
	case !ok:
		in, err = m.baseHolds(key, ex)
	case m.base != nil && old.CreateRev <= m.base.Revision():
		// Live since before the image's revision, without a break: the
		// image holds it.
		in = true
	default:
		// Created since the image: new, or deleted and created again.
		in, err = m.inBase(key)
	}
	if err != nil {
		return err
	}
	switch {
	case in:
		m.tombs++
		t := &record.Entry{Key: key, Version: tombstone}
		if later {
			m.top.LoadLater(t)
		} else {
			m.top.Load(t)
		}
	case ok:
		m.newLive--
		if later {
			m.top.DeleteLater(key)
		} else {
			m.top.Delete(key)
		}
	default:
		return nil // a key it does not hold
	}
	m.note(key)
	return nil
}

// current returns the entry of key for Apply, its bytes in the changes or
// in m.got, or nil.
func (m *Map) current(key []byte) (*record.Entry, error) {
	if e, ok := m.top.Get(key); ok {
		if e.Version == tombstone {
			return nil, nil
		}
		return e, nil
	}
	if m.base == nil {
		return nil, nil
	}
	e, out, ok, err := m.base.GetAppend(m.got[:0], key)
	m.got = out
	if !ok || err != nil {
		return nil, err
	}
	return &e, nil
}

// Apply applies r, as record.Map.Apply does: every operation takes
// effect and the revision becomes r.Revision, or an add that cannot apply
// (record.ErrNotInteger, record.ErrOverflow) leaves the map unchanged. An
// error of the image's may leave it partly changed: a caller drops the
// map then (recovery fails).
func (m *Map) Apply(r *record.Record) error {
	if len(r.Ops) == 1 || !hasAdd(r.Ops) {
		for i := range r.Ops {
			if err := m.applyOp(&r.Ops[i], r.Revision); err != nil {
				return err
			}
		}
		m.top.SetRevision(r.Revision)
		return nil
	}
	// Staged, so that a failing add leaves the map untouched and later
	// operations see the earlier ones.
	staged := make(map[string]*record.Entry, len(r.Ops))
	order := make([]string, 0, len(r.Ops))
	for i := range r.Ops {
		k := string(r.Ops[i].Key)
		cur, seen := staged[k]
		if !seen {
			c, err := m.current(r.Ops[i].Key)
			if err != nil {
				return err
			}
			if c != nil {
				cc := *c
				cc.Key, cc.Value = bytes.Clone(c.Key), bytes.Clone(c.Value)
				cur = &cc
			}
			order = append(order, k)
		}
		e, err := record.Next(cur, &r.Ops[i], r.Revision)
		if err != nil {
			return err
		}
		staged[k] = e
	}
	for _, k := range order {
		var err error
		if e := staged[k]; e != nil {
			err = m.Load(e)
		} else {
			err = m.Delete([]byte(k))
		}
		if err != nil {
			return err
		}
	}
	m.top.SetRevision(r.Revision)
	return nil
}

func (m *Map) applyOp(op *record.Op, rev record.Revision) error {
	if op.Kind == record.KindDelete {
		return m.Delete(op.Key)
	}
	cur, err := m.current(op.Key)
	if err != nil {
		return err
	}
	_, next, err := record.NextInto(&m.ne, m.next[:0], cur, op, rev)
	m.next = next
	if err != nil {
		return err
	}
	return m.put(&m.ne, false, knownAs(cur != nil))
}

// hasAdd reports whether ops holds an operation other than a put or a
// delete: one that can fail on the state it finds.
func hasAdd(ops []record.Op) bool {
	for i := range ops {
		if k := ops[i].Kind; k != record.KindPut && k != record.KindDelete {
			return true
		}
	}
	return false
}

// All returns the entries with start <= key < end in key order (a nil
// end: to the last), the changes merged over the image. The *Entry
// yielded is reused from one step to the next; the Key and Value of an
// entry of the changes stay valid, those of an entry of the image only
// until the next step (AllStable copies them). Damage in the image ends
// the walk with its error as the last pair.
func (m *Map) All(start, end []byte) iter.Seq2[*record.Entry, error] {
	return m.all(start, end, false)
}

// AllStable is All whose entries' Key and Value all stay valid: the
// image's are read through image.Reader.AllStable, a copy of each block.
func (m *Map) AllStable(start, end []byte) iter.Seq2[*record.Entry, error] {
	return m.all(start, end, true)
}

// AllOnce is All for a walk that does not come back, as a checkpoint's:
// the image's pages behind it leave the process's resident memory as it
// goes (image.Reader.AllOnce).
func (m *Map) AllOnce(start, end []byte) iter.Seq2[*record.Entry, error] {
	return m.walk(start, end, false, true)
}

func (m *Map) all(start, end []byte, stable bool) iter.Seq2[*record.Entry, error] {
	return m.walk(start, end, stable, false)
}

func (m *Map) walk(start, end []byte, stable, once bool) iter.Seq2[*record.Entry, error] {
	return func(yield func(*record.Entry, error) bool) {
		if m.base == nil {
			for e := range m.top.All(start, end) {
				if e.Version != tombstone && !yield(e, nil) {
					return
				}
			}
			return
		}
		base := m.base.All(start, end)
		switch {
		case stable:
			base = m.base.AllStable(start, end)
		case once:
			base = m.base.AllOnce(start, end)
		}
		if m.top.Len() == 0 {
			// Nothing changed since the image: it alone.
			for e, err := range base {
				if !yield(e, err) || err != nil {
					return
				}
			}
			return
		}
		next := m.topSteps(start, end)
		te, tok := next()
		for be, err := range base {
			if err != nil {
				yield(nil, err)
				return
			}
			for tok && bytes.Compare(te.Key, be.Key) < 0 {
				if te.Version != tombstone && !yield(te, nil) {
					return
				}
				te, tok = next()
			}
			if tok && bytes.Equal(te.Key, be.Key) {
				if te.Version != tombstone && !yield(te, nil) {
					return
				}
				te, tok = next()
				continue
			}
			if !yield(be, nil) {
				return
			}
		}
		for ; tok; te, tok = next() {
			if te.Version != tombstone && !yield(te, nil) {
				return
			}
		}
	}
}

// topStep is how many of the changes a merge with the image takes from
// the tree at a time (a variable for the tests, which take a few).
var topStep = 256

// topSteps returns a function that yields the changes with start <= key
// < end one by one, in key order, taking them from the tree topStep at a
// time: a merge's other side, without the goroutine switch per entry of a
// pulled iterator (iter.Pull), which was a fifth of a merged scan's time.
// The *Entry it returns is valid until the call after the next.
func (m *Map) topSteps(start, end []byte) func() (*record.Entry, bool) {
	var (
		buf  = make([]record.Entry, 0, topStep)
		at   int
		from = start
		more = true
	)
	return func() (*record.Entry, bool) {
		if at == len(buf) {
			if !more {
				return nil, false
			}
			buf, at = m.top.AppendRange(buf[:0], from, end, topStep), 0
			if len(buf) < topStep {
				more = false
			}
			if len(buf) == 0 {
				return nil, false
			}
			// The next step starts just after the last key.
			last := buf[len(buf)-1].Key
			from = append(append(make([]byte, 0, len(last)+1), last...), 0)
		}
		at++
		return &buf[at-1], true
	}
}

// Clone returns a view of the map as it is: later changes to m do not
// affect it. It holds its own handle on the image (Close releases it), so
// it reads on after a Swap closed m's. Its changes are a copy-on-write
// clone of m's (record.Map.Clone).
func (m *Map) Clone() (*Map, error) {
	v := &Map{top: m.top.Clone(), newLive: m.newLive, tombs: m.tombs}
	if m.base != nil {
		b, err := m.base.Clone()
		if err != nil {
			return nil, err
		}
		v.base = b
	}
	return v, nil
}

// Close releases the map's handle on its image, if any. A view's Close
// leaves the map it came from serving.
func (m *Map) Close() error {
	if m.base == nil {
		return nil
	}
	return m.base.Close()
}

// Freeze returns a view (Clone) for a checkpoint to write as the next
// image, and notes the keys changed from now on, for Swap.
func (m *Map) Freeze() (*Map, error) {
	v, err := m.Clone()
	if err != nil {
		return nil, err
	}
	m.since = map[string]struct{}{}
	m.frozen = m.Revision()
	return v, nil
}

// Thaw forgets the frozen view, as after a checkpoint that failed.
func (m *Map) Thaw() { m.since = nil }

// Swap puts img, the image of the view Freeze returned, under the map in
// place of the old one, which it closes: the changes img holds leave
// memory; those made since the freeze stay, over img. It fails, and the
// map is unchanged (img is the caller's to close), when no view is frozen,
// img is not at the frozen revision, or img cannot tell whether it holds
// a key changed since.
func (m *Map) Swap(img *image.Reader) error {
	if m.since == nil {
		return fmt.Errorf("%w: no view is frozen", ErrSwap)
	}
	if img.Revision() != m.frozen {
		return fmt.Errorf("%w: the image is at revision %d, the view at %d", ErrSwap, img.Revision(), m.frozen)
	}
	top := record.NewMap()
	newLive, tombs := 0, 0
	for k := range m.since {
		key := []byte(k)
		e, deleted, ok := m.Change(key)
		in, err := img.Has(key)
		if err != nil {
			return err
		}
		switch {
		case ok && !deleted:
			top.Load(&e)
			if !in {
				newLive++
			}
		case in:
			top.Load(&record.Entry{Key: key, Version: tombstone})
			tombs++
		}
	}
	top.SetRevision(m.top.Revision())
	if m.base != nil {
		m.base.Close()
	}
	m.top, m.base, m.newLive, m.tombs, m.since = top, img, newLive, tombs, nil
	return nil
}

// Prefetch starts loading the changes' index slot of key into the cache
// (record.Map.Prefetch).
func (m *Map) Prefetch(key []byte) { m.top.Prefetch(key) }

// FlushSome brings up to n of the changes into the ordered tree
// (record.Map.FlushSome), and returns how many wait still.
func (m *Map) FlushSome(n int) int { return m.top.FlushSome(n) }

// Build brings the changes' ordered tree up to date (record.Map.Build).
func (m *Map) Build() { m.top.Build() }

// BuildAsync builds the changes' ordered tree on a goroutine of its own
// (record.Map.BuildAsync).
func (m *Map) BuildAsync() { m.top.BuildAsync() }

// Hash returns the content hash of the entries (record.Map.Hash's), or
// the first error of reading the image.
func (m *Map) Hash() (record.Hash, error) {
	h := record.NewHasher()
	for e, err := range m.All(nil, nil) {
		if err != nil {
			return record.Hash{}, err
		}
		h.Add(e)
	}
	return h.Sum(), nil
}

// UnflushedForTesting returns the number of changes waiting for the
// ordered tree (record.Map.UnflushedForTesting).
func (m *Map) UnflushedForTesting() int { return m.top.UnflushedForTesting() }
