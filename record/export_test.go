package record

import "fmt"

// SetCompactMin sets the dead space below which maps are never compacted,
// so that tests can make small maps compact, and returns the old value.
func SetCompactMin(n int64) int64 {
	old := compactMin
	compactMin = n
	return old
}

// SetChunkSizes sets the smallest and largest chunk of new arenas and the
// entry size from which an entry gets an allocation of its own, and
// returns a func that restores them.
func SetChunkSizes(min, max, own int) (restore func()) {
	a, b, c := minChunk, maxChunk, ownChunk
	minChunk, maxChunk, ownChunk = min, max, own
	return func() { minChunk, maxChunk, ownChunk = a, b, c }
}

// CheckArena checks the arena's bookkeeping against the index: every key's
// entry is in one of the map's chunks, each chunk's live count is the size
// of the entries the index points to in it, and the totals add up.
func (m *Map) CheckArena() error {
	m.settle()
	if m.idx == nil {
		return nil
	}
	live := make([]int64, len(m.a.chunks))
	var err error
	m.idx.all(func(p ref) {
		i := m.a.chunkOf(p)
		if i < 0 {
			if err == nil {
				err = fmt.Errorf("key %q: its entry is in no chunk of the map", refKey(p))
			}
			return
		}
		live[i] += int64(refSize(p))
	})
	if err != nil {
		return err
	}
	for _, s := range m.idx.slots {
		if s != 0 && s != tombSlot {
			if id := (s & locMask) >> offBits; id >= uint64(len(m.a.byID)) || m.a.byID[id] == nil {
				return fmt.Errorf("an index slot names chunk %d, which is not there", id)
			}
		}
	}
	var total, dead int64
	for i, c := range m.a.chunks {
		if m.a.byID[c.id] != c {
			return fmt.Errorf("chunk %d is not under its number %d", i, c.id)
		}
		if c.live != live[i] {
			return fmt.Errorf("chunk %d counts %d live bytes, the index points to %d", i, c.live, live[i])
		}
		total += c.live
		dead += c.deadBytes()
	}
	if total != m.a.live || dead != m.a.dead {
		return fmt.Errorf("arena counts %d live and %d dead bytes, its chunks %d and %d", m.a.live, m.a.dead, total, dead)
	}
	return nil
}

// SetStoredHashSlots sets the index size past which a rehash hashes the
// keys again, and returns a func that restores it.
func SetStoredHashSlots(n int) (restore func()) {
	old := storedHashSlots
	storedHashSlots = n
	return func() { storedHashSlots = old }
}

// SetEvacuateStep sets how many entries one change copies out of a chunk
// being evacuated, and returns a func that restores it.
func SetEvacuateStep(n int) (restore func()) {
	old := evacuateStep
	evacuateStep = n
	return func() { evacuateStep = old }
}

// SetAsyncBuild makes BuildAsync start a goroutine for any map, held
// until release is called (then a new gate holds those started after),
// and returns a func that restores the defaults.
func SetAsyncBuild() (release, restore func()) {
	oldMin, oldGate := asyncBuildMin, buildGate
	asyncBuildMin, buildGate = 0, make(chan struct{})
	release = func() {
		close(buildGate)
		buildGate = make(chan struct{})
	}
	restore = func() {
		close(buildGate)
		asyncBuildMin, buildGate = oldMin, oldGate
	}
	return release, restore
}
