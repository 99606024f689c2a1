package record

// MapOption changes the tuning of a map made by NewMapWith.
type MapOption func(*tuning)

// NewMapWith returns an empty map whose tuning is the default changed by
// opts: each test gets its own, and no test changes another's maps.
func NewMapWith(opts ...MapOption) *Map {
	tu := defaultTuning
	for _, o := range opts {
		o(&tu)
	}
	return newMap(&tu)
}

// CompactMin sets the dead space below which the map never evacuates a
// chunk, so that small maps compact.
func CompactMin(n int64) MapOption { return func(tu *tuning) { tu.compactMin = n } }

// ChunkSizes sets the smallest and largest chunk of the arena and the
// entry size from which an entry gets an allocation of its own.
func ChunkSizes(min, max, own int) MapOption {
	return func(tu *tuning) { tu.minChunk, tu.maxChunk, tu.ownChunk = min, max, own }
}

// StoredHashSlots sets the index size past which a rehash hashes the keys
// again.
func StoredHashSlots(n int) MapOption { return func(tu *tuning) { tu.storedHashSlots = n } }

// EvacuateStep sets how many entries one change copies out of a chunk
// being evacuated.
func EvacuateStep(n int) MapOption { return func(tu *tuning) { tu.evacuateStep = n } }

// HeldBuilds makes BuildAsync start a goroutine for a map of any size,
// held until ReleaseBuilds.
func HeldBuilds() MapOption {
	return func(tu *tuning) { tu.asyncBuildMin, tu.buildGate = 0, make(chan struct{}) }
}

// ReleaseBuilds lets the trees BuildAsync started so far on a map made
// with HeldBuilds be built; those started after wait for the next call.
func (m *Map) ReleaseBuilds() {
	tu := m.a.tune
	close(tu.buildGate)
	tu.buildGate = make(chan struct{})
}

// CheckInvariants checks the map against the state table at the top of
// map.go (see checkInvariants), changing nothing.
func (m *Map) CheckInvariants() error { return m.checkInvariants() }
