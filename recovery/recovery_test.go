package recovery_test

import (
	"bytes"
	"errors"
	"log/slog"
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

func TestEmptyDirectory(t *testing.T) {
	fsys, dir := newDir(t)
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Map.Len() != 0 || res.Map.Revision() != 0 || res.Checkpointed {
		t.Errorf("fresh directory: %d keys, revision %d, checkpointed %v", res.Map.Len(), res.Map.Revision(), res.Checkpointed)
	}
	if got := res.Writer.Segment(); got != 1 {
		t.Errorf("appending to segment %s, want 000001", got)
	}
	res.Writer.Close()
	// The new segment and the marker survive a power loss: Create
	// synced the directory, and so did the marker's publication.
	crashed := fsys.CrashClone()
	if diff := cmp.Diff([]string{"KVSTORE", "log.000001"}, mustList(t, crashed, dir)); diff != "" {
		t.Errorf("after power loss (-want +got):\n%s", diff)
	}
	res, err = recovery.Recover(crashed, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
}

func mustList(tb testing.TB, fsys interface {
	List(string) ([]string, error)
}, dir string) []string {
	tb.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return names
}

// TestRevisionsContinue appends after a recovery and recovers again: the
// revisions go on from the snapshot's.
func TestRevisionsContinue(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Writer
	p := record.Append(nil, &record.Record{Revision: 18, Ops: []record.Op{{Kind: record.KindAdd, Key: []byte("c"), Delta: 45}}})
	if _, err := w.Append(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	res, err = recovery.Recover(fsys.CrashClone(), dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Writer.Close()
	if e, ok, _ := res.Map.Lookup([]byte("c")); !ok || string(e.Value) != "100" || e.ModRev != 18 || e.CreateRev != 1 || e.Version != 11 {
		t.Errorf("c = %+v, want value 100, create 1, mod 18, version 11", e)
	}
	if res.Map.Revision() != 18 || res.Replayed != 1 {
		t.Errorf("revision %d, replayed %d; want 18, 1", res.Map.Revision(), res.Replayed)
	}
}

// TestLeftoversRemoved: a stale snapshot.tmp and a segment the snapshot
// covers (a crash came before its deletion) are removed, and the covered
// segment is not replayed.
func TestLeftoversRemoved(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	keep := fsys.Clone()
	res, err := recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	// Put log.000001 back, as if the crash came before its unlink, and a
	// half-written snapshot.tmp.
	seg, _ := readAll(keep, wal.SegmentPath(dir, 1))
	rewrite(t, fsys, wal.SegmentPath(dir, 1), seg)
	tmp, _ := fsys.Create(dir + "/" + snapshot.TmpName)
	tmp.WriteAt([]byte("half a snapshot"), 0)
	tmp.Close()

	res, err = recovery.Recover(fsys, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	if diff := cmp.Diff(articleWant, dump(res.Map)); diff != "" {
		t.Errorf("map (-want +got):\n%s", diff)
	}
	if res.Replayed != 0 || !cmp.Equal(res.Deleted, []wal.SegmentNum{1}) {
		t.Errorf("replayed %d, deleted %v; want 0 and [1]", res.Replayed, res.Deleted)
	}
	if diff := cmp.Diff([]string{"KVSTORE", "log.000002", "snapshot"}, mustList(t, fsys, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestReadOnlyWritesNothing recovers without changing any file.
func TestReadOnlyWritesNothing(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	before := files(t, fsys, dir)
	res, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Writer != nil {
		t.Error("read-only recovery returned a writer")
	}
	if diff := cmp.Diff(articleWant, dump(res.Map)); diff != "" {
		t.Errorf("map (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, files(t, fsys, dir)); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
}

func TestParseBug(t *testing.T) {
	for _, s := range []string{"", "none", "double-apply"} {
		if _, err := variant.Parse(s); err != nil {
			t.Errorf("ParseBug(%q): %v", s, err)
		}
	}
	if _, err := variant.Parse("nope"); err == nil {
		t.Error("ParseBug(nope) succeeded")
	}
}

// TestRevisionPastMaxRefused puts a record at MaxRevision+1 after a
// snapshot at MaxRevision: the revision is the next, but no store can
// continue from it, so recovery must refuse it as corruption at that
// record, and change nothing.
func TestRevisionPastMaxRefused(t *testing.T) {
	fsys, dir := newDir(t)
	meta := snapshot.Meta{Covered: 0, Revision: record.MaxRevision}
	if err := snapshot.Write(fsys, dir, meta, func(func(*record.Entry) bool) {}); err != nil {
		t.Fatal(err)
	}
	writeLog(t, fsys, dir, 1, record.MaxRevision+1, articleOps()[:1])
	off := recordSpans(t, fsys, dir, 1)[0][0]
	before := files(t, fsys, dir)
	_, err := recovery.Recover(fsys, dir, recovery.Options{})
	var ce *wal.CorruptError
	switch {
	case !recovery.IsCorrupt(err):
		t.Errorf("Recover: %v, want corruption", err)
	case !errors.As(err, &ce) || ce.File != wal.SegmentPath(dir, 1) || ce.Offset != off:
		t.Errorf("Recover: %v, want corruption at %s offset %d", err, wal.SegmentPath(dir, 1), off)
	}
	if d := cmp.Diff(before, files(t, fsys, dir)); d != "" {
		t.Errorf("a refused recovery changed files (-before +after):\n%s", d)
	}
	rep, err := recovery.Check(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() {
		t.Errorf("Check found the record at MaxRevision+1 clean")
	}
}

// TestSkipRecord: a skip moves the revision past a gap a repair left; a
// skip that does not move it forward, or a jump by any other record, is
// corruption.
func TestSkipRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		revs    []record.Record
		wantRev record.Revision // 0: corrupt
	}{
		{"skip forward", []record.Record{put(1, "a", "1"), {Revision: 100, Skip: true}, put(101, "b", "2")}, 101},
		{"skip by one", []record.Record{put(1, "a", "1"), {Revision: 2, Skip: true}}, 2},
		{"skip backwards", []record.Record{put(1, "a", "1"), put(2, "b", "2"), {Revision: 2, Skip: true}}, 0},
		{"a put that jumps", []record.Record{put(1, "a", "1"), put(5, "b", "2")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			w, err := wal.Create(fsys, dir, 1, wal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.revs {
				if _, err := w.Append(record.Append(nil, &tc.revs[i])); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
			res, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
			if tc.wantRev == 0 {
				if !recovery.IsCorrupt(err) {
					t.Errorf("Recover: %v, want corruption", err)
				}
				return
			}
			if err != nil || res.Map.Revision() != tc.wantRev {
				t.Errorf("Recover: %v, revision %v; want %d", err, res, tc.wantRev)
			}
		})
	}
}

func put(rev record.Revision, k, v string) record.Record {
	return record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindPut, Key: []byte(k), Value: []byte(v)}}}
}

// TestSummaryLogged checks the summary a recovery logs at Info, and that
// a logger above Info gets nothing.
func TestSummaryLogged(t *testing.T) {
	fsys, dir := newDir(t)
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"level=INFO", "msg=recovered", "dir=" + dir, "revision=0", "keys=0", "covered=000000", "checkpointed=false"}},
		{slog.LevelWarn, nil},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
		res, err := recovery.Recover(fsys, dir, recovery.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		res.Writer.Close()
		got := buf.String()
		if tc.want == nil && got != "" {
			t.Errorf("logger at %v: logged %q, want nothing", tc.level, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("logger at %v: %q lacks %q", tc.level, got, w)
			}
		}
	}
}

// openCounter counts, for each file name, the opens for reading, the
// opens for reading and writing, and the files open now.
type openCounter struct {
	vfs.FS
	reads, writes, open map[string]int
	headReads           map[string]int // reads at offset 0
}

func newOpenCounter(fsys vfs.FS) *openCounter {
	return &openCounter{FS: fsys, reads: map[string]int{}, writes: map[string]int{}, open: map[string]int{}, headReads: map[string]int{}}
}

func (c *openCounter) Open(n string) (vfs.File, error) {
	return c.wrap(n, c.reads, c.FS.Open)
}

func (c *openCounter) OpenReadWrite(n string) (vfs.File, error) {
	return c.wrap(n, c.writes, c.FS.OpenReadWrite)
}

func (c *openCounter) wrap(n string, count map[string]int, open func(string) (vfs.File, error)) (vfs.File, error) {
	f, err := open(n)
	if err != nil {
		return nil, err
	}
	count[n]++
	c.open[n]++
	return &countedFile{File: f, c: c, name: n}, nil
}

type countedFile struct {
	vfs.File
	c      *openCounter
	name   string
	closed bool
}

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	if off == 0 {
		f.c.headReads[f.name]++
	}
	return f.File.ReadAt(p, off)
}

func (f *countedFile) Close() error {
	if !f.closed {
		f.closed = true
		f.c.open[f.name]--
	}
	return f.File.Close()
}

func (c *openCounter) leftOpen() []string {
	var names []string
	for n, k := range c.open {
		if k != 0 {
			names = append(names, n)
		}
	}
	return names
}

// TestNewestSegmentOpenedOnce checks that recovery opens the segment its
// writer appends to once, for reading and writing, scan and writer
// alike, and that every file it opens is closed once the writer is:
// when the writer appends to that segment, when a torn tail makes it
// seal the segment and start the next one instead, and in a read-only
// recovery, which opens nothing for writing.
func TestNewestSegmentOpenedOnce(t *testing.T) {
	for _, tc := range []string{"appends", "torn tail", "read-only"} {
		t.Run(tc, func(t *testing.T) {
			fsys, dir := newDir(t)
			writeLog(t, fsys, dir, 1, 1, articleOps())
			seg := wal.SegmentPath(dir, 1)
			// A first recovery marks the directory, whose identification
			// then reads no segment.
			res, err := recovery.Recover(fsys, dir, recovery.Options{DeferCheckpoint: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Writer.Close(); err != nil {
				t.Fatal(err)
			}
			res.Map.Close()
			if tc == "torn tail" {
				rd := &wal.Reader{FS: fsys, Dir: dir}
				info, err := rd.Scan(1, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				f, err := fsys.OpenReadWrite(seg)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(info.End - 3); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			c := newOpenCounter(fsys)
			res, err = recovery.Recover(c, dir, recovery.Options{DeferCheckpoint: true, ReadOnly: tc == "read-only"})
			if err != nil {
				t.Fatal(err)
			}
			if tc == "torn tail" != res.Torn {
				t.Fatalf("torn %v", res.Torn)
			}
			switch tc {
			case "appends":
				if c.writes[seg] != 1 || c.reads[seg] != 0 {
					t.Errorf("%s opened %d times for writing, %d for reading; want once, for writing", seg, c.writes[seg], c.reads[seg])
				}
				// The writer takes the header the scan read and checked.
				if c.headReads[seg] != 1 {
					t.Errorf("%s read at offset 0 %d times; want once, by the scan", seg, c.headReads[seg])
				}
			case "read-only":
				if len(c.writes) != 0 {
					t.Errorf("a read-only recovery opened %v for writing", c.writes)
				}
			}
			if res.Writer != nil {
				if err := res.Writer.Close(); err != nil {
					t.Fatal(err)
				}
			}
			res.Map.Close()
			if open := c.leftOpen(); len(open) != 0 {
				t.Errorf("left open: %v", open)
			}
			if got := dump(res.Map); tc != "torn tail" && !cmp.Equal(got, articleWant) {
				t.Errorf("recovered %v, want %v", got, articleWant)
			}
		})
	}
}

// TestReadOnlyTrustsOnlyClaimed: a read-only open shows a record of the
// log's tail only if it ends where a later record claims the segment
// synced, in the newest segment and in an unsealed one before it (a
// rotation cut short). The record past the claim here starts exactly at
// the claimed offset, so a reader that tests where a record starts
// instead of where it ends takes it; and it sits in the unsealed segment
// before an empty newest one, which a reader that judges only the newest
// trusts whole. Either would show a write a power loss can take back.
func TestReadOnlyTrustsOnlyClaimed(t *testing.T) {
	for _, tc := range []struct {
		name string
		next bool // a rotation cut short: segment 2 created, holding no record
	}{
		{"newest segment", false},
		{"unsealed segment before the newest", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			w, err := wal.Create(fsys, dir, 1, wal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r1, r2 := put(1, "a", "synced"), put(2, "b", "not synced")
			if _, err := w.Append(record.Append(nil, &r1)); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			// b starts where a ends, the offset b's own header claims
			// synced: nothing claims b.
			if _, err := w.Append(record.Append(nil, &r2)); err != nil {
				t.Fatal(err)
			}
			if err := w.Abandon(); err != nil {
				t.Fatal(err)
			}
			if tc.next {
				w2, err := wal.Create(fsys, dir, 2, wal.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := w2.Abandon(); err != nil {
					t.Fatal(err)
				}
			}
			res, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			type outcome struct {
				Revision  record.Revision
				Unvouched int
			}
			want := outcome{Revision: 1, Unvouched: 1}
			got := outcome{Revision: res.Map.Revision(), Unvouched: res.Unvouched}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("read-only recovery (-want +got):\n%s", diff)
			}
		})
	}
}
