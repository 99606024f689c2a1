package recovery_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// TestRetained: of the covered segments, the newest are kept while those
// kept add up to less than the retention; segment 1 is never kept, and a
// segment already gone counts nothing.
func TestRetained(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	sizes := map[wal.SegmentNum]int{1: 100, 2: 100, 3: 300, 5: 100, 6: 50}
	for s, n := range sizes {
		f, err := fsys.Create(wal.SegmentPath("/d", s))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, n), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	covered := []wal.SegmentNum{1, 2, 3, 4, 5, 6} // 4 is gone already
	for _, tc := range []struct {
		retain    int64
		del, keep []wal.SegmentNum
	}{
		{0, covered, []wal.SegmentNum{}},
		{-1, covered, []wal.SegmentNum{}},
		{1, []wal.SegmentNum{1, 2, 3, 4, 5}, []wal.SegmentNum{6}},
		{50, []wal.SegmentNum{1, 2, 3, 4, 5}, []wal.SegmentNum{6}},
		{51, []wal.SegmentNum{1, 2, 3, 4}, []wal.SegmentNum{5, 6}},
		{150, []wal.SegmentNum{1, 2, 3, 4}, []wal.SegmentNum{5, 6}},
		{151, []wal.SegmentNum{1, 2}, []wal.SegmentNum{3, 4, 5, 6}},
		{451, []wal.SegmentNum{1}, []wal.SegmentNum{2, 3, 4, 5, 6}},
		{1 << 30, []wal.SegmentNum{1}, []wal.SegmentNum{2, 3, 4, 5, 6}},
	} {
		del, keep, err := recovery.Retained(fsys, "/d", covered, tc.retain)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.del, del); d != "" {
			t.Errorf("retain %d: deleted (-want +got):\n%s", tc.retain, d)
		}
		if d := cmp.Diff(tc.keep, keep); d != "" {
			t.Errorf("retain %d: kept (-want +got):\n%s", tc.retain, d)
		}
	}
}
