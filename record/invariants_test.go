package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"unsafe"
)

// checkInvariants checks that m is in one of the modes of the state table
// at the top of map.go, and that its index, tree, tracked entries and
// arena agree with each other as that mode says. It reads the map and
// changes nothing: entries Load left waiting (ahead) stay waiting, so the
// tests can check the state every method must settle first. It costs a
// walk of every entry, for tests only.
func (m *Map) checkInvariants() error {
	if err := m.checkMode(); err != nil {
		return err
	}
	if m.idx == nil {
		return m.checkClone()
	}
	live, err := m.checkIndex()
	if err != nil {
		return err
	}
	if m.t != nil {
		if err := m.checkTree(live); err != nil {
			return err
		}
	}
	if m.own {
		if err := m.checkTracked(); err != nil {
			return err
		}
	}
	// The arena: the index's entries and those Load left waiting are the
	// live ones, chunk by chunk.
	pointed := make([]ref, 0, len(live)+m.nAhead)
	for _, p := range live {
		pointed = append(pointed, p)
	}
	for i := range m.nAhead {
		pointed = append(pointed, m.ahead[i].p)
	}
	return m.checkArena(pointed, true)
}

// checkMode checks the fields that say which mode m is in.
func (m *Map) checkMode() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.a.tune == nil {
		fail("no tuning")
	}
	if m.nAhead < 0 || m.nAhead > loadAhead {
		fail("%d entries ahead, at most %d", m.nAhead, loadAhead)
	}
	if m.nAhead > 0 && !m.own {
		fail("%d entries ahead in a map not deferred while empty", m.nAhead)
	}
	if m.own && (m.t != nil || m.pending != nil || m.idx == nil) {
		fail("deferred while empty, with a tree (%v), a pending tree (%v) or no index (%v)", m.t != nil, m.pending != nil, m.idx == nil)
	}
	if !m.own && (m.tracked != nil || m.sorted != 0 || m.deadTracked != 0) {
		fail("%d entries tracked (%d sorted, %d dead) in a map not deferred while empty", len(m.tracked), m.sorted, m.deadTracked)
	}
	if m.t != nil && m.pending != nil {
		fail("a tree and a pending one")
	}
	if m.idx == nil {
		if m.t == nil && m.pending == nil {
			fail("a clone with neither a tree nor a pending one")
		}
		if len(m.later) != 0 || m.ev != nil || m.own {
			fail("a clone with %d changes later, evacuating (%v) or deferred while empty (%v)", len(m.later), m.ev != nil, m.own)
		}
	} else if m.fix != nil {
		fail("%d fixes in a map with an index: only a clone taken while pending has them", len(m.fix))
	}
	if m.fix != nil && m.pending == nil {
		fail("%d fixes without a pending tree", len(m.fix))
	}
	if m.ev != nil {
		if m.a.chunkOf(ref(unsafe.SliceData(m.ev.b))) < 0 || m.ev == m.a.cur || m.evOff > len(m.ev.b) {
			fail("evacuating a chunk not in the arena, the chunk being filled, or past its end (%d of %d)", m.evOff, len(m.ev.b))
		}
	}
	return errors.Join(errs...)
}

// checkIndex checks the index's counts and returns its entries by key.
func (m *Map) checkIndex() (map[string]ref, error) {
	x := m.idx
	live := make(map[string]ref, x.live)
	used := 0
	var size int64
	for _, s := range x.slots {
		if s == 0 {
			continue
		}
		used++
		if s == tombSlot {
			continue
		}
		if id := (s & locMask) >> offBits; id >= uint64(len(m.a.byID)) || m.a.byID[id] == nil {
			return nil, fmt.Errorf("an index slot names chunk %d, which is not there", id)
		}
		p := m.a.ref(s & locMask)
		k := string(refKey(p))
		if _, ok := live[k]; ok {
			return nil, fmt.Errorf("key %q is in the index twice", k)
		}
		if x.find(refKey(p)) < 0 {
			return nil, fmt.Errorf("key %q is in the index where a lookup does not find it", k)
		}
		live[k] = p
		size += int64(refKeyLen(p) + refValueLen(p))
	}
	if len(live) != x.live || used != x.used {
		return nil, fmt.Errorf("index counts %d keys and %d used slots, holds %d and %d", x.live, x.used, len(live), used)
	}
	if size != m.bytes {
		return nil, fmt.Errorf("map counts %d bytes, its index's entries hold %d", m.bytes, size)
	}
	return live, nil
}

// checkTree checks that the tree is in key order and agrees with the
// index live, but for the keys of the changes it has yet to take (later).
func (m *Map) checkTree(live map[string]ref) error {
	waiting := make(map[string]bool, len(m.later))
	for _, p := range m.later {
		waiting[string(refKey(p))] = true
	}
	var err error
	var prev ref
	inTree := 0
	m.t.Ascend(func(it sortItem) bool {
		p := it.p
		if it.prefix != keyPrefix(refKey(p)) {
			err = fmt.Errorf("the tree's item of %q has prefix %x", refKey(p), it.prefix)
			return false
		}
		if prev != nil && bytes.Compare(refKey(prev), refKey(p)) >= 0 {
			err = fmt.Errorf("the tree holds %q after %q", refKey(p), refKey(prev))
			return false
		}
		prev = p
		k := string(refKey(p))
		if waiting[k] {
			return true
		}
		inTree++
		if live[k] != p {
			err = fmt.Errorf("key %q: the tree's entry is not the index's, and no change waits for it", k)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	// Every key of the tree that no change waits for is the index's: the
	// index holds no other such key.
	missing := -inTree
	for k := range live {
		if !waiting[k] {
			missing++
		}
	}
	if missing != 0 {
		return fmt.Errorf("the index holds %d keys that the tree lacks, and no change waits for them", missing)
	}
	return nil
}

// checkTracked checks the entries a map deferred while empty tracks for
// Build: every live entry once, the dead ones counted, the first sorted
// in key order.
func (m *Map) checkTracked() error {
	if m.sorted > len(m.tracked) {
		return fmt.Errorf("%d tracked entries sorted of %d", m.sorted, len(m.tracked))
	}
	dead := 0
	for i, it := range m.tracked {
		if it.prefix != keyPrefix(refKey(it.p)) {
			return fmt.Errorf("tracked entry %d: its prefix is not its key's", i)
		}
		if i > 0 && i < m.sorted && compareItems(m.tracked[i-1], it) >= 0 {
			return fmt.Errorf("tracked entry %d (%q) out of order in the first %d", i, refKey(it.p), m.sorted)
		}
		if isDead(it.p) {
			dead++
			continue
		}
		if m.idx.get(refKey(it.p)) != it.p {
			return fmt.Errorf("tracked entry %d (%q) is live but not its key's entry in the index", i, refKey(it.p))
		}
	}
	if dead != m.deadTracked || len(m.tracked)-dead != m.idx.live {
		return fmt.Errorf("%d entries tracked, %d dead (counted %d), for %d keys", len(m.tracked), dead, m.deadTracked, m.idx.live)
	}
	return nil
}

// checkClone checks a clone: its tree in key order, its byte count, and
// its arena, which holds the entries changed in the clone itself.
func (m *Map) checkClone() error {
	if m.t == nil {
		return nil // pending: the tree and its fixes are the map's it came from
	}
	var (
		err     error
		prev    ref
		size    int64
		pointed []ref
	)
	m.t.Ascend(func(it sortItem) bool {
		p := it.p
		if it.prefix != keyPrefix(refKey(p)) {
			err = fmt.Errorf("the clone's tree's item of %q has prefix %x", refKey(p), it.prefix)
			return false
		}
		if prev != nil && bytes.Compare(refKey(prev), refKey(p)) >= 0 {
			err = fmt.Errorf("the clone's tree holds %q after %q", refKey(p), refKey(prev))
			return false
		}
		prev = p
		size += int64(refKeyLen(p) + refValueLen(p))
		if m.a.chunkOf(p) >= 0 {
			pointed = append(pointed, p)
		}
		return true
	})
	if err != nil {
		return err
	}
	if size != m.bytes {
		return fmt.Errorf("clone counts %d bytes, its tree's entries hold %d", m.bytes, size)
	}
	return m.checkArena(pointed, false)
}

// checkArena checks the arena's bookkeeping against live, its live
// entries: each chunk's live count is the size of those in it, and the
// totals add up. With all, every live entry must be in one of its chunks
// (a clone's tree also holds entries of the map it came from).
func (m *Map) checkArena(live []ref, all bool) error {
	a := &m.a
	sizes := make([]int64, len(a.chunks))
	for _, p := range live {
		i := a.chunkOf(p)
		if i < 0 {
			if all {
				return fmt.Errorf("key %q: its entry is in no chunk of the map", refKey(p))
			}
			continue
		}
		sizes[i] += int64(refSize(p))
	}
	var total, dead int64
	for i, c := range a.chunks {
		if int(c.id) >= len(a.byID) || a.byID[c.id] != c {
			return fmt.Errorf("chunk %d is not under its number %d", i, c.id)
		}
		if c.live != sizes[i] {
			return fmt.Errorf("chunk %d counts %d live bytes, its live entries hold %d", i, c.live, sizes[i])
		}
		total += c.live
		dead += c.deadBytes()
	}
	if total != a.live || dead != a.dead {
		return fmt.Errorf("arena counts %d live and %d dead bytes, its chunks %d and %d", a.live, a.dead, total, dead)
	}
	return nil
}

// TestCheckInvariantsCatches runs the checker on maps broken by hand, one
// field at a time, in each mode, and on the same maps unbroken: it must
// fail on each broken one and pass on the others.
func TestCheckInvariantsCatches(t *testing.T) {
	entry := func(k, v string, rev Revision) *Entry {
		return &Entry{Key: []byte(k), Value: []byte(v), CreateRev: rev, ModRev: rev, Version: 1}
	}
	ordered := func() *Map {
		m := NewMap()
		m.Load(entry("a", "1", 1))
		m.Load(entry("b", "2", 2))
		m.LoadLater(entry("c", "3", 3))
		return m
	}
	own := func() *Map {
		m := NewMap()
		m.Defer()
		m.Load(entry("a", "1", 1))
		m.Load(entry("b", "2", 2))
		m.Load(entry("a", "longer", 3)) // the first "a" is dead once settled
		m.settle()
		m.Load(entry("c", "3", 4)) // left ahead
		return m
	}
	clone := func() *Map {
		c := ordered().Clone()
		c.Load(entry("d", "4", 5))
		return c
	}
	tests := []struct {
		name  string
		make  func() *Map
		spoil func(m *Map)
	}{
		{"ordered: bytes miscounted", ordered, func(m *Map) { m.bytes++ }},
		{"ordered: a change lost before the tree took it", ordered, func(m *Map) { m.later = nil }},
		{"ordered: entries ahead", ordered, func(m *Map) { m.nAhead = 1 }},
		{"ordered: tracking", ordered, func(m *Map) { m.tracked = []sortItem{} }},
		{"ordered: index count", ordered, func(m *Map) { m.idx.live++ }},
		{"ordered: chunk live bytes", ordered, func(m *Map) { m.a.chunks[0].live++ }},
		{"ordered: arena dead bytes", ordered, func(m *Map) { m.a.dead++ }},
		{"ordered: with a pending tree", ordered, func(m *Map) { m.pending = &pendingTree{done: make(chan struct{})} }},
		{"own: with a tree", own, func(m *Map) { m.t = newTree() }},
		{"own: a dead entry not counted", own, func(m *Map) { m.deadTracked-- }},
		{"own: a live entry untracked", own, func(m *Map) { m.tracked = m.tracked[:len(m.tracked)-1] }},
		{"own: sorted past the order", own, func(m *Map) { m.sorted = len(m.tracked) }},
		{"own: an entry ahead lost", own, func(m *Map) { m.nAhead = 0 }},
		{"clone: with changes later", clone, func(m *Map) { m.later = append(m.later, m.find([]byte("a"))) }},
		{"clone: bytes miscounted", clone, func(m *Map) { m.bytes-- }},
		{"clone: chunk live bytes", clone, func(m *Map) { m.a.chunks[0].live-- }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.make()
			if err := m.checkInvariants(); err != nil {
				t.Fatalf("unbroken: %v", err)
			}
			tc.spoil(m)
			if err := m.checkInvariants(); err == nil {
				t.Fatal("broken, and the checker passed it")
			} else {
				t.Log(err)
			}
		})
	}
}
