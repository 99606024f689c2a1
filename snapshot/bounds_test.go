package snapshot_test

import (
	"runtime"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

// TestCountClaimBounded: a snapshot whose meta record (and end frame)
// claim 2^40 entries but hold two is refused, and reading it allocates by
// the file's size, not by the count: the reader streams entries and
// compares the count only at the end.
func TestCountClaimBounded(t *testing.T) {
	entries := []*record.Entry{entry("a", "1", 1, 1, 1), entry("b", "2", 2, 2, 1)}
	const huge = 1 << 40
	metaOnly := specEncode(snapshot.Meta{Covered: 1, Revision: 2, Count: huge}, entries)
	both := specHeader(1)
	both = specFrame(both, typeMeta, specMeta(1, 2, huge))
	for _, e := range entries {
		both = specFrame(both, typeEntry, specEntry(e))
	}
	endAt := int64(len(both))
	both = specEnd(both, huge)
	for _, tc := range []struct {
		name string
		b    []byte
	}{{"meta claims 2^40", metaOnly}, {"meta and end claim 2^40", both}} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = decode(tc.b) })
			checkCorrupt(t, err, snapshot.ErrCorrupt, "snapshot", endAt)
			if n > 64<<10 {
				t.Errorf("Decode of %d bytes allocated %d bytes", len(tc.b), n)
			}
			m := memWith(t, tc.b)
			n = allocated(func() { _, err = read(m, "d") })
			checkCorrupt(t, err, snapshot.ErrCorrupt, "d/snapshot", endAt)
			if n > 64<<10 {
				t.Errorf("Read of %d bytes allocated %d bytes", len(tc.b), n)
			}
		})
	}
}
