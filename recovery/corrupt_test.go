package recovery_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// recordSpans returns the offset and end of every data record of a
// segment.
func recordSpans(tb testing.TB, fsys vfs.FS, dir string, seg wal.SegmentNum) [][2]int64 {
	tb.Helper()
	var spans [][2]int64
	rd := &wal.Reader{FS: fsys, Dir: dir}
	_, err := rd.Scan(seg, true, func(r wal.Record) error {
		spans = append(spans, [2]int64{r.Offset, r.Offset + wal.HeaderSize + int64(len(r.Payload))})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return spans
}

// mapAfter returns the map after the first n of ops.
func mapAfter(tb testing.TB, ops []record.Op, n int) map[string]string {
	tb.Helper()
	m := record.NewMap()
	for i, op := range ops[:n] {
		if err := m.Apply(&record.Record{Revision: record.Revision(i + 1), Ops: []record.Op{op}}); err != nil {
			tb.Fatal(err)
		}
	}
	return dump(m)
}

func rewrite(tb testing.TB, fsys vfs.FS, name string, b []byte) {
	tb.Helper()
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		tb.Fatal(err)
	}
	f, err := fsys.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	if err := vfs.SyncDir(fsys, path.Dir(name)); err != nil {
		tb.Fatal(err)
	}
}

// TestTornTailEveryOffset cuts the segment at every byte offset inside
// each of the last three records: recovery keeps the records before the
// cut, reports no error, and a second recovery agrees.
func TestTornTailEveryOffset(t *testing.T) {
	ops := articleOps()
	fsys0, dir := newDir(t)
	writeLog(t, fsys0, dir, 1, 1, ops)
	spans := recordSpans(t, fsys0, dir, 1)
	full, err := vfs.ReadFile(fsys0, wal.SegmentPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	for i := len(spans) - 3; i < len(spans); i++ {
		for cut := spans[i][0]; cut < spans[i][1]; cut++ {
			fsys := fsys0.Clone()
			rewrite(t, fsys, wal.SegmentPath(dir, 1), full[:cut])
			want := mapAfter(t, ops, i)
			for attempt := 1; attempt <= 2; attempt++ {
				res, err := recovery.Recover(fsys, dir, recovery.Options{})
				if err != nil {
					t.Fatalf("cut at %d (record %d), recovery %d: %v", cut, i+1, attempt, err)
				}
				if d := cmp.Diff(want, dump(res.Map)); d != "" {
					t.Fatalf("cut at %d (record %d), recovery %d: map (-want +got):\n%s", cut, i+1, attempt, d)
				}
				if attempt == 1 && cut > spans[i][0] && (!res.Torn || res.TornOffset != spans[i][0]) {
					t.Errorf("cut at %d: torn=%v at %d, want torn at %d", cut, res.Torn, res.TornOffset, spans[i][0])
				}
				res.Writer.Close()
			}
			cases++
		}
	}
	t.Logf("%d cuts", cases)
}

// TestTornTailCrashedRecovery is the shape of cockroachdb/cockroach#68319:
// a recovery that meets a torn tail and crashes after starting the next
// segment must not leave the torn tail to be found later in a segment that
// is no longer the newest.
func TestTornTailCrashedRecovery(t *testing.T) {
	ops := articleOps()
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, ops)
	spans := recordSpans(t, fsys, dir, 1)
	full, _ := vfs.ReadFile(fsys, wal.SegmentPath(dir, 1))
	last := spans[len(spans)-1]
	rewrite(t, fsys, wal.SegmentPath(dir, 1), full[:last[0]+7])
	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeferCheckpoint=%v", deferred), func(t *testing.T) {
			// Deferred, the recovery only cuts, seals and starts the next
			// segment: the kv store's open.
			outs := crashRecoveries(t, fsys.Clone(), dir, recovery.Options{DeferCheckpoint: deferred}, variant.None, 2, "")
			checkOutcomes(t, outs, mapAfter(t, ops, len(ops)-1))
		})
	}
}

// TestCorruptionRefused damages files in ways a crash cannot: recovery
// returns an error matching the corruption sentinels that names the file
// and offset, and changes no file.
func TestCorruptionRefused(t *testing.T) {
	ops := articleOps()
	type setup func(tb testing.TB, fsys *vfs.MemFS, dir string)
	base := func(tb testing.TB, fsys *vfs.MemFS, dir string) { writeLog(tb, fsys, dir, 1, 1, ops) }
	// withSnapshot recovers once, so that the directory holds a snapshot
	// covering log.000001 and an empty log.000002, then adds more records.
	withSnapshot := func(tb testing.TB, fsys *vfs.MemFS, dir string) {
		writeLog(tb, fsys, dir, 1, 1, ops)
		res, err := recovery.Recover(fsys, dir, recovery.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		res.Writer.Close()
		if err := fsys.Remove(wal.SegmentPath(dir, 2)); err != nil {
			tb.Fatal(err)
		}
		writeLog(tb, fsys, dir, 2, 18, ops[:3])
	}
	type tc struct {
		name    string
		setup   setup
		corrupt func(tb testing.TB, fsys *vfs.MemFS, dir string)
		file    string // the error must name it
		offset  int64  // and this offset, when >= 0
	}
	var cases []tc
	// One flipped byte at every position of every record but the last:
	// the record after it proves it had been synced.
	fsys0, dir := newDir(t)
	base(t, fsys0, dir)
	spans := recordSpans(t, fsys0, dir, 1)
	for i, sp := range spans[:len(spans)-1] {
		for off := sp[0]; off < sp[1]; off++ {
			cases = append(cases, tc{
				name:  fmt.Sprintf("flip record %d byte %d", i+1, off),
				setup: base,
				corrupt: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
					name := wal.SegmentPath(dir, 1)
					b, _ := vfs.ReadFile(fsys, name)
					b[off] ^= 0x40
					rewrite(tb, fsys, name, b)
				},
				file: "log.000001", offset: sp[0],
			})
		}
	}
	cases = append(cases,
		tc{name: "gap between segments", setup: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
			writeLog(tb, fsys, dir, 1, 1, ops[:5])
			writeLog(tb, fsys, dir, 3, 6, ops[5:])
		}, corrupt: func(testing.TB, *vfs.MemFS, string) {}, file: "log.000002", offset: -1},
		tc{name: "first segment missing without snapshot", setup: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
			writeLog(tb, fsys, dir, 2, 1, ops)
		}, corrupt: func(testing.TB, *vfs.MemFS, string) {}, file: "log.000001", offset: -1},
		tc{name: "segment after the covered one missing", setup: withSnapshot,
			corrupt: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
				fsys.Remove(wal.SegmentPath(dir, 2))
			}, file: "log.000002", offset: -1},
		tc{name: "snapshot byte flipped", setup: withSnapshot,
			corrupt: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
				name := dir + "/" + snapshot.Name
				b, _ := vfs.ReadFile(fsys, name)
				b[len(b)/2] ^= 1
				rewrite(tb, fsys, name, b)
			}, file: "snapshot", offset: -2},
		tc{name: "snapshot cut short", setup: withSnapshot,
			corrupt: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
				name := dir + "/" + snapshot.Name
				b, _ := vfs.ReadFile(fsys, name)
				rewrite(tb, fsys, name, b[:len(b)-1])
			}, file: "snapshot", offset: -2},
		tc{name: "sealed segment cut at a record boundary", setup: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
			writeLog(tb, fsys, dir, 1, 1, ops)
			writeLog(tb, fsys, dir, 2, 18, ops[:2])
		}, corrupt: func(testing.TB, *vfs.MemFS, string) {}, file: "log.000001", offset: -2},
		tc{name: "revision skips", setup: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
			writeLog(tb, fsys, dir, 1, 2, ops)
		}, corrupt: func(testing.TB, *vfs.MemFS, string) {}, file: "log.000001", offset: -2},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			c.setup(t, fsys, dir)
			c.corrupt(t, fsys, dir)
			before := files(t, fsys, dir)
			_, err := recovery.Recover(fsys, dir, recovery.Options{})
			if err == nil {
				t.Fatal("recovery succeeded on a corrupt directory")
			}
			if !recovery.IsCorrupt(err) {
				t.Fatalf("error %v is not a corruption error", err)
			}
			var ce *wal.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *wal.CorruptError", err)
			}
			if !strings.HasSuffix(ce.File, "/"+c.file) {
				t.Errorf("error names %s, want %s", ce.File, c.file)
			}
			if c.offset >= -1 && ce.Offset != c.offset {
				t.Errorf("error at offset %d, want %d: %v", ce.Offset, c.offset, err)
			}
			if d := cmp.Diff(before, files(t, fsys, dir)); d != "" {
				t.Errorf("files changed by a refused recovery (-before +after):\n%s", d)
			}
		})
	}
}

// TestFirstDamageReported: recovery applies records a few behind the one
// it reads, yet reports damage in log order. A record that cannot be
// applied (an add on a value that is not a number) is followed by a
// record with a flipped byte, read before the first is applied: the error
// must name the first.
func TestFirstDamageReported(t *testing.T) {
	ops := []record.Op{
		{Kind: record.KindPut, Key: []byte("x"), Value: []byte("not a number")},
		{Kind: record.KindAdd, Key: []byte("x"), Delta: 1},
	}
	for i := range 5 {
		ops = append(ops, record.Op{Kind: record.KindPut, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
	}
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, ops)
	spans := recordSpans(t, fsys, dir, 1)
	name := wal.SegmentPath(dir, 1)
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	b[spans[3][0]+10] ^= 0x40 // the second put after the add
	rewrite(t, fsys, name, b)
	_, err = recovery.Recover(fsys, dir, recovery.Options{})
	var ce *wal.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Recover: %v, want a *wal.CorruptError", err)
	}
	if ce.Offset != spans[1][0] || !strings.Contains(ce.Reason, "cannot be applied") {
		t.Fatalf("Recover: %v at offset %d, want the add's failure at offset %d", err, ce.Offset, spans[1][0])
	}
}
