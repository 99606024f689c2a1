package kv_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// The corruption matrix damages a prepared directory (a snapshot and
// several segments, every operation synced on its own) in every way below,
// one at a time, and opens it.
//
// What a crash can leave. Every operation was acknowledged, and so synced,
// before the next was written; a crash never damages synced bytes. So a
// crash can damage nothing but the newest segment, and there only in ways
// that look like unsynced writes that were lost: the file ends early (or
// ends in zeros), or its last record is incomplete. The reader cannot tell
// those shapes from the same damage done to synced bytes unless a later
// record says so: each record carries the offset synced when it was
// written, and here, every operation being synced on its own, that is the
// record's own offset, so any intact record proves every byte before it
// durable. Hence:
//
//   - damage to the snapshot or to a sealed segment (its records, or the
//     bytes after its seal record) must be refused: Open fails with an
//     error for which recovery.IsCorrupt holds (or the format-version
//     error, for a flipped version field), naming the damaged file and an
//     offset between the start of the damaged record and the first damaged
//     byte, and every file is left unchanged;
//   - a newest segment cut short, or ending in zeros, must be accepted: the
//     state is the model after exactly the records that lie wholly before
//     the first damaged byte (as after a power loss that lost the rest).
//     So must a sealed segment that lost only zeros after its seal, and a
//     damaged snapshot.tmp (never trusted: removed), with nothing lost;
//   - other damage to the newest segment may go either way, but when Open
//     accepts it the state must be the model after exactly the records
//     wholly before the damage, and none of the records it drops may still
//     be in the file intact: a later intact record proves the damaged one
//     was synced, so dropping it would be a silent loss. In practice this
//     allows only damage to the last record (FORMAT.md, "Limit"), or bytes
//     after it, or a zeroed sector that held the last record's header and
//     everything before it in the segment;
//   - a deleted segment must be refused, except the newest, when the one
//     before it is sealed and live: a crash after a rotation's seal and
//     before the new segment's directory sync leaves exactly that (and
//     none of its records were acknowledged then), so its loss cannot be
//     seen;
//   - a segment duplicated under the next number must be refused.
//
// Every refusal must be reported by recovery.Check, and recovery.PlanRepair
// followed by Apply must make the directory open again, keeping every
// file it changes or moves as NAME.broken with the damaged bytes; the
// repaired state is the model after the revision the plan keeps. Every
// acceptance must be found clean by Check, and a second open must give the
// same map.

// matrixExpect says what Open must do with a damaged directory.
type matrixExpect int

const (
	mustRefuse matrixExpect = iota // damage no crash can cause
	mustAccept                     // damage a crash can cause: cut and go on
	mayAccept                      // either; an acceptance must keep the exact prefix
)

func (e matrixExpect) String() string {
	return [...]string{"must refuse", "must accept", "may accept"}[e]
}

// matrixDamage is one case of the matrix.
type matrixDamage struct {
	kind   string // flip, truncate, garbage, zero-sector, delete, duplicate, stale-tmp
	name   string
	file   string // the damaged file (base name)
	first  int64  // the first damaged byte; -1 for the whole file
	expect matrixExpect
	keep   int // for an acceptance: the operations that must survive
	// errFile is the file a refusal must name; errFrom is the smallest
	// offset it may give (the start of the damaged record), -2 for any.
	errFile string
	errFrom int64
	apply   func(files map[string][]byte)
}

// matrixDir is the prepared directory and what is known about it.
type matrixDir struct {
	fs          *vfs.MemFS
	segmentSize int64
	files       map[string][]byte // every file but LOCK
	ops         []kv.Op
	models      []map[string]string
	snapRev     int
	covered     wal.SegmentNum
	newest      wal.SegmentNum
	segs        []wal.SegmentNum
	// recs locates the record of every operation after the snapshot.
	recs map[int]recLoc
	// lastOp is the last operation in each segment or before it.
	lastOp map[wal.SegmentNum]int
}

type recLoc struct {
	file     string
	off, end int64
}

func matrixOps() []kv.Op {
	ops := faultOps(60)
	ops[40] = kv.PutOp([]byte("big"), bytes.Repeat([]byte("0123456789abcdef"), 200)) // a 3.2 KiB record
	return ops
}

// matrixLayout says how the prepared directory is written.
type matrixLayout struct {
	segmentSize  int64
	checkpointAt int // checkpoint before this operation; 0: never
}

var (
	// manySegments: a snapshot and four segments of 512 bytes, one of them
	// large (a 3.2 KiB record).
	manySegments = matrixLayout{segmentSize: 512, checkpointAt: 25}
	// oneSegment: every record in one segment (6 KiB of records in 8 KiB
	// reserved), no snapshot, so
	// that damage in the middle of the newest segment has intact records,
	// and whole sectors of them, after it.
	oneSegment = matrixLayout{segmentSize: 8 << 10}
)

// prepareMatrix writes the operations, each synced on its own, with the
// layout's segment size and checkpoint, and closes.
func prepareMatrix(tb testing.TB, lay matrixLayout) *matrixDir {
	tb.Helper()
	ops := matrixOps()
	mem := vfs.NewMem()
	opts := kv.Options{FS: mem, SegmentSize: lay.segmentSize, CheckpointBytes: -1, LogRetention: -1}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		tb.Fatal(err)
	}
	for i, op := range ops {
		if i > 0 && i == lay.checkpointAt {
			if err := s.Checkpoint(); err != nil {
				tb.Fatal(err)
			}
		}
		if _, _, err := s.Submit(op).Wait(); err != nil {
			tb.Fatalf("operation %d: %v", i+1, err)
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	d := &matrixDir{fs: mem, ops: ops, models: modelDumps(tb, ops), files: map[string][]byte{}, segmentSize: lay.segmentSize,
		recs: map[int]recLoc{}, lastOp: map[wal.SegmentNum]int{}}
	for n, b := range dirFiles(tb, mem, "/data") {
		d.files[n] = []byte(b)
	}
	if lay.checkpointAt > 0 {
		meta, err := readMeta(mem, "/data")
		if err != nil {
			tb.Fatal(err)
		}
		d.snapRev, d.covered = int(meta.Revision), meta.Covered
	}
	if d.segs, err = wal.ListSegments(mem, "/data"); err != nil {
		tb.Fatal(err)
	}
	d.newest = d.segs[len(d.segs)-1]
	rd := &wal.Reader{FS: mem, Dir: "/data"}
	last := d.snapRev
	for _, seg := range d.segs {
		_, err := rd.Scan(seg, seg == d.newest, func(r wal.Record) error {
			rec, err := record.Decode(r.Payload)
			if err != nil {
				return err
			}
			d.recs[int(rec.Revision)] = recLoc{file: wal.SegmentName(seg), off: r.Offset,
				end: r.Offset + wal.HeaderSize + int64(len(r.Payload))}
			last = int(rec.Revision)
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		d.lastOp[seg] = last
	}
	if lay.checkpointAt > 0 && (len(d.segs) < 4 || d.covered == 0 || d.snapRev != lay.checkpointAt) ||
		lay.checkpointAt == 0 && len(d.segs) != 1 || last != len(ops) {
		tb.Fatalf("prepared directory: segments %v, snapshot covers %s at %d, last revision %d", d.segs, d.covered, d.snapRev, last)
	}
	return d
}

// frameStarts returns the offsets of the records of a segment in order,
// and the end of the last one (where zeros begin).
func frameStarts(b []byte) ([]int64, int64) {
	var starts []int64
	off := int64(0)
	for off+wal.HeaderSize <= int64(len(b)) && b[off] != 0 {
		starts = append(starts, off)
		off += wal.HeaderSize + int64(binary.LittleEndian.Uint32(b[off+4:]))
	}
	return starts, off
}

// snapshotStarts returns the offsets of the file header and of every frame
// of a snapshot, and its size.
func snapshotStarts(b []byte) ([]int64, int64) {
	starts := []int64{0}
	for off := int64(8); off+9 <= int64(len(b)); off += 9 + int64(binary.LittleEndian.Uint32(b[off+4:])) {
		starts = append(starts, off)
	}
	return starts, int64(len(b))
}

// unitStart returns the start of the record (or frame, or the zeros after
// the last one) that holds offset off.
func unitStart(starts []int64, end, off int64) int64 {
	if off >= end {
		return end
	}
	i := sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1
	return starts[max(i, 0)]
}

// opsBefore returns the operations that survive when the newest segment is
// cut at off: every one whose record ends at or before off.
func (d *matrixDir) opsBefore(file string, off int64) int {
	n := d.snapRev
	for rev := d.snapRev + 1; rev <= len(d.ops); rev++ {
		r := d.recs[rev]
		if r.file == file && r.end > off {
			break
		}
		n = rev
	}
	return n
}

// cases builds the matrix. Files larger than 2 KiB get every byte of every
// record header flipped and a seeded sample of the other offsets.
func (d *matrixDir) cases(seed uint64) []matrixDamage {
	rng := rand.New(rand.NewPCG(seed, 0x6d61))
	var out []matrixDamage
	names := make([]string, 0, len(d.files))
	for n := range d.files {
		names = append(names, n)
	}
	slices.Sort(names)
	newest := wal.SegmentName(d.newest)
	for _, name := range names {
		b := d.files[name]
		size := int64(len(b))
		seg, isSeg := wal.ParseSegmentName(name)
		var starts []int64
		var end int64
		if isSeg {
			starts, end = frameStarts(b)
		} else {
			starts, end = snapshotUnits(b)
		}
		// content damage whose first changed byte is at off, in a file
		// that ends at newSize, judged by the rules above.
		judge := func(c matrixDamage, off int64, tailZero bool) matrixDamage {
			c.file, c.first, c.errFile = name, off, name
			c.errFrom = unitStart(starts, end, off)
			switch {
			case !isSeg:
				c.expect = mustRefuse
			case seg != d.newest:
				c.expect = mustRefuse
				if c.kind == "truncate" && off >= end {
					c.expect, c.keep = mustAccept, len(d.ops) // only zeros after the seal went
				}
			default:
				c.keep = d.opsBefore(name, off)
				c.expect = mayAccept
				if tailZero {
					c.expect = mustAccept // a file cut short, or ending in zeros
				}
			}
			return c
		}
		modify := func(f func(b []byte) []byte) func(map[string][]byte) {
			return func(files map[string][]byte) { files[name] = f(slices.Clone(files[name])) }
		}

		// One flipped bit per byte, a different bit at each offset. The
		// zeros after the last record all read alike: the first 32 of
		// them and every 61st after.
		offsets := make([]int64, 0, size)
		if size <= 2048 {
			for off := range size {
				if off < end+32 || (off-end)%61 == 0 {
					offsets = append(offsets, off)
				}
			}
		} else {
			pick := map[int64]bool{}
			for _, s := range starts {
				for off := s; off < min(s+wal.HeaderSize, size); off++ {
					pick[off] = true
				}
			}
			for range 256 {
				pick[rng.Int64N(min(size, end+64))] = true
			}
			for off := range pick {
				offsets = append(offsets, off)
			}
			slices.Sort(offsets)
		}
		for _, off := range offsets {
			bit := byte(1) << (off % 8)
			out = append(out, judge(matrixDamage{kind: "flip", name: fmt.Sprintf("flip %s byte %d bit %d", name, off, off%8),
				apply: modify(func(b []byte) []byte { b[off] ^= bit; return b })}, off, false))
		}

		// Cuts at every record boundary and inside every record.
		cuts := map[int64]bool{0: true, end: true, size - 1: true}
		for i, s := range starts {
			e := end
			if i+1 < len(starts) {
				e = starts[i+1]
			}
			for _, c := range []int64{s, s + 1, s + 8, s + 9, s + wal.HeaderSize, (s + e) / 2, e - 1} {
				if c >= 0 && c < size {
					cuts[c] = true
				}
			}
		}
		if end < size {
			cuts[(end+size)/2] = true
		}
		for c := range cuts {
			if c < 0 || c >= size {
				continue
			}
			out = append(out, judge(matrixDamage{kind: "truncate", name: fmt.Sprintf("truncate %s at %d", name, c),
				apply: modify(func(b []byte) []byte { return b[:c] })}, c, true))
		}

		// Garbage after the end of the file.
		garbage := make([]byte, 100)
		for i := range garbage {
			garbage[i] = byte(1 + rng.IntN(255))
		}
		out = append(out, judge(matrixDamage{kind: "garbage", name: fmt.Sprintf("append garbage to %s", name),
			apply: modify(func(b []byte) []byte { return append(b, garbage...) })}, size, false))

		// A zeroed 512-byte sector.
		for s := int64(0); s < size; s += 512 {
			e := min(s+512, size)
			first := int64(-1)
			for i := s; i < e; i++ {
				if b[i] != 0 {
					first = i
					break
				}
			}
			if first < 0 {
				continue // already zeros: no damage
			}
			out = append(out, judge(matrixDamage{kind: "zero-sector", name: fmt.Sprintf("zero %s sector %d", name, s/512),
				apply: modify(func(b []byte) []byte { clear(b[s:e]); return b })}, first, allZeroFrom(b, e)))
		}

		// The whole file deleted, or copied under the next number.
		del := matrixDamage{kind: "delete", name: "delete " + name, file: name, first: -1, expect: mustRefuse, errFrom: -2,
			apply: func(files map[string][]byte) { delete(files, name) }}
		switch {
		case name == recovery.MarkerName:
			// The store is adopted as one made before the marker
			// existed, and the marker written again.
			del.expect, del.keep = mustAccept, len(d.ops)
		case !isSeg:
			// The segments no longer start at 1, and nothing covers the
			// revisions before the first: the snapshot is named missing.
			del.errFile = name
		default:
			// A gap; or the segment after the covered one missing; or
			// the newest, which a crash never loses: the one before it
			// was sealed only once it existed durably (without a
			// snapshot, the marker says log.000001 existed).
			del.errFile = name
		}
		out = append(out, del)
		if !isSeg {
			// A snapshot.tmp left by a crashed checkpoint, damaged: never
			// trusted, removed.
			out = append(out, matrixDamage{kind: "stale-tmp", name: "a damaged " + snapshot.TmpName, file: snapshot.TmpName, first: -1,
				expect: mustAccept, keep: len(d.ops), apply: func(files map[string][]byte) {
					tmp := slices.Clone(files[name])
					tmp[len(tmp)/2] ^= 0x10
					files[snapshot.TmpName] = tmp
				}})
		}
		if isSeg {
			dup := wal.SegmentName(d.newest + 1)
			out = append(out, matrixDamage{kind: "duplicate", name: fmt.Sprintf("copy %s to %s", name, dup), file: name, first: -1,
				expect: mustRefuse, errFile: newest, errFrom: -2,
				apply: func(files map[string][]byte) { files[dup] = slices.Clone(files[name]) }})
		}
	}
	return imageRules(out, d.files[snapshot.Name])
}

func allZeroFrom(b []byte, from int64) bool {
	for _, c := range b[from:] {
		if c != 0 {
			return false
		}
	}
	return true
}

// matrixOutcome is how one case ended.
type matrixOutcome string

const (
	keptAll  matrixOutcome = "opened, nothing lost"
	cutTail  matrixOutcome = "opened, cut as a torn tail"
	refused  matrixOutcome = "refused as corrupt, then repaired"
	refusedV matrixOutcome = "refused (format version), then repaired"
	// An image is verified a block at a time, on first read: damage in
	// one may let the store open, and must then fail the reads that need
	// it (or, for a part no read needs, be found by Check).
	failedRead  matrixOutcome = "opened, the reads that need the damage refused, then repaired"
	failedCheck matrixOutcome = "opened, every read right, Check refused, then repaired"
)

// memDirWith returns a MemFS holding the given files in /data, all durable.
func memDirWith(tb testing.TB, files map[string][]byte) *vfs.MemFS {
	tb.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll("/data", 0o700); err != nil {
		tb.Fatal(err)
	}
	for n, b := range files {
		f, err := m.Create(path.Join("/data", n))
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
	}
	if err := vfs.SyncDir(m, "/data"); err != nil {
		tb.Fatal(err)
	}
	return m
}

// runCase applies one damage, opens, and checks the outcome against the
// rules. It returns the outcome, or the problems found.
func (d *matrixDir) runCase(tb testing.TB, c matrixDamage, bug variant.Bug) (out matrixOutcome, problems []string) {
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	defer func() {
		if r := recover(); r != nil {
			problem("panic: %v", r)
		}
	}()
	files := map[string][]byte{}
	for n, b := range d.files {
		files[n] = b
	}
	c.apply(files)
	fsys := memDirWith(tb, files)
	before := filesOf(tb, fsys)
	opts := kv.Options{FS: variant.Wrap(fsys, bug), SegmentSize: d.segmentSize, CheckpointBytes: -1, LogRetention: -1}
	s, err := kv.Open("/data", &opts)
	lazy := false
	if err == nil && c.file == snapshot.Name && c.expect == mustRefuse && isImage(d.files[snapshot.Name]) {
		lazy = true
		err = d.readAll(s, problem)
		s.Close()
		if err == nil {
			if rep, cerr := recovery.Check(fsys, "/data"); cerr != nil || rep.Clean() {
				problem("opened, read every key right, and Check found nothing: %v %v", cerr, rep.Problems)
				return "", problems
			}
		}
	}
	if err == nil && !lazy {
		got, rev := dumpStore(s), int(s.Revision())
		s.Close()
		if c.expect == mustRefuse {
			problem("opened at revision %d: damage no crash can cause must be refused", rev)
			return "", problems
		}
		if rev != c.keep || !mapsEqual(got, d.models[rev]) {
			problem("opened at revision %d with %v; want exactly the %d operations before the damage: %v", rev, got, c.keep, d.models[c.keep])
		}
		for r := rev + 1; r <= len(d.ops); r++ {
			loc, ok := d.recs[r]
			if r <= d.snapRev {
				problem("operation %d, held by the snapshot, dropped", r)
				break
			}
			if fb := files[loc.file]; ok && loc.end <= int64(len(fb)) && bytes.Equal(fb[loc.off:loc.end], d.files[loc.file][loc.off:loc.end]) {
				problem("operation %d dropped although its record is intact in %s at %d: a later record proves it was synced", r, loc.file, loc.off)
				break
			}
		}
		if _, err := fsys.Stat(path.Join("/data", snapshot.TmpName)); err == nil {
			problem("an open left %s in place", snapshot.TmpName)
		}
		rep, err := recovery.Check(fsys, "/data")
		if err != nil || !rep.Clean() {
			problem("after an accepted open, Check: %v %v", err, rep.Problems)
		}
		again, err := kv.Open("/data", &opts)
		if err != nil {
			problem("second open: %v", err)
		} else {
			if got2 := dumpStore(again); !mapsEqual(got, got2) || int(again.Revision()) != rev {
				problem("second open gave another map: %v at %d", got2, again.Revision())
			}
			again.Close()
		}
		if rev == len(d.ops) {
			return keptAll, problems
		}
		return cutTail, problems
	}

	// Refused: typed, naming the file and offset, nothing changed.
	out = refused
	if c.expect == mustAccept {
		problem("refused damage a crash can cause: %v", err)
	}
	if lazy {
		out = failedRead
		if err == nil {
			out = failedCheck
			err = &wal.CorruptError{Err: snapshot.ErrCorrupt, File: c.errFile, Offset: c.first} // Check's, above
		}
	}
	var ce *wal.CorruptError
	switch {
	case errors.Is(err, wal.ErrVersion) || errors.Is(err, snapshot.ErrVersion):
		out = refusedV
	case !recovery.IsCorrupt(err):
		problem("open failed with %v, which recovery.IsCorrupt does not report", err)
	}
	if !errors.As(err, &ce) {
		problem("error %v is not a *wal.CorruptError naming file and offset", err)
	} else {
		if c.errFile != "" && path.Base(ce.File) != c.errFile {
			problem("error names %s, want %s: %v", ce.File, c.errFile, err)
		}
		if c.errFrom != -2 && (ce.Offset < c.errFrom || ce.Offset > c.first) {
			problem("error at offset %d, want between %d (the damaged record) and %d (the first damaged byte): %v", ce.Offset, c.errFrom, c.first, err)
		}
	}
	if dd := diffFiles(before, filesOf(tb, fsys)); dd != "" {
		problem("a refused open changed files: %s", dd)
	}
	rep, cerr := recovery.Check(fsys, "/data")
	if cerr != nil || rep.Clean() {
		problem("Check after a refused open: %v, problems %v: the damage went unreported", cerr, rep.Problems)
		return out, problems
	}
	plan, err := recovery.PlanRepair(fsys, "/data")
	if err != nil {
		problem("PlanRepair: %v", err)
		return out, problems
	}
	if err := plan.Apply(fsys, nil); err != nil {
		problem("repair: %v", err)
		return out, problems
	}
	after := filesOf(tb, fsys)
	for n, b := range before {
		if a, ok := after[n]; ok && (a == b || onlyZerosReplaced(b, a)) {
			continue // the repair's skip went where there were zeros
		}
		if after[n+recovery.BrokenSuffix] != b {
			problem("the repair changed or moved %s without keeping %s%s", n, n, recovery.BrokenSuffix)
		}
	}
	r, err := kv.Open("/data", &opts)
	if err != nil {
		problem("open after repair: %v", err)
		return out, problems
	}
	defer r.Close()
	got, rev := dumpStore(r), int(r.Revision())
	if plan.LostKeys != nil {
		// The snapshot was written again with the entries that read:
		// the keys in its damaged ranges are gone, the others are as at
		// its revision, and the later operations apply on top.
		base := map[string]string{}
		for k, v := range d.models[d.snapRev] {
			if !inLostRange(k, plan.LostKeys) {
				base[k] = v
			}
		}
		if want := modelOnto(tb, base, d.ops, d.snapRev, len(d.ops)); rev != int(plan.Skip) || !mapsEqual(got, want) {
			problem("after a repair that kept the snapshot's readable entries: revision %d (skip %d), map %v, want %v", rev, plan.Skip, got, want)
		}
	} else if _, ok := after[snapshot.Name+recovery.BrokenSuffix]; ok {
		// The snapshot was set aside: its keys are gone; what remains is
		// the later operations applied to an empty map.
		// The store resumes after the repair's skip.
		if want := modelFrom(tb, d.ops, int(plan.KeepThrough), len(d.ops)); rev != int(plan.Skip) || !mapsEqual(got, want) {
			problem("after a snapshot repair: revision %d (plan keeps %d, skips to %d), map %v, want %v", rev, plan.KeepThrough, plan.Skip, got, want)
		}
	} else if rev != int(plan.Skip) || !mapsEqual(got, d.models[plan.KeepThrough]) {
		problem("after repair: revision %d with %v, want the plan's skip %d and the model's map at revision %d", rev, got, plan.Skip, plan.KeepThrough)
	}
	// No revision the damaged files held may be given again: the skip
	// is above all of them.
	if int(plan.Skip) <= len(d.ops) {
		problem("the repair's skip to revision %d does not pass revision %d, which the log held", plan.Skip, len(d.ops))
	}
	return out, problems
}

// readAll reads every key of the store as a user would, after an open
// of a directory whose image is damaged: a scan of everything, then a Get
// of every key of the model. Each read must give the model's entry or
// fail; it returns the first failure, and reports a wrong value or a
// failure that is not corruption to problem.
func (d *matrixDir) readAll(s *kv.Store, problem func(string, ...any)) error {
	want := d.models[len(d.ops)]
	var first error
	fail := func(err error) {
		if !errors.Is(err, snapshot.ErrCorrupt) {
			problem("a read failed with %v, which is not snapshot corruption", err)
		}
		if first == nil {
			first = err
		}
	}
	for e, err := range s.ScanErr(nil, nil) {
		if err != nil {
			fail(err)
			break
		}
		if w, ok := want[string(e.Key)]; !ok || w != string(e.Value) {
			problem("scan served %q = %q, the model holds %q (%v)", e.Key, e.Value, w, ok)
		}
	}
	for k, v := range want {
		e, err := s.Get([]byte(k))
		switch {
		case err != nil:
			fail(err)
		case string(e.Value) != v:
			problem("Get %q served %q, the model holds %q", k, e.Value, v)
		}
	}
	return first
}

// modelFrom applies ops from+1 .. to to an empty map.
func modelFrom(tb testing.TB, ops []kv.Op, from, to int) map[string]string {
	tb.Helper()
	m := record.NewMap()
	for i := from; i < to && i < len(ops); i++ {
		if err := m.Apply(&record.Record{Revision: kv.Revision(i + 1), Ops: []record.Op{ops[i]}}); err != nil {
			tb.Fatal(err)
		}
	}
	out := map[string]string{}
	for e := range m.All(nil, nil) {
		out[string(e.Key)] = string(e.Value)
	}
	return out
}

// modelOnto applies ops from+1 .. to to the map base.
func modelOnto(tb testing.TB, base map[string]string, ops []kv.Op, from, to int) map[string]string {
	tb.Helper()
	m := record.NewMap()
	for k, v := range base {
		if err := m.Apply(&record.Record{Revision: 1, Ops: []record.Op{{Kind: record.KindPut, Key: []byte(k), Value: []byte(v)}}}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := from; i < to && i < len(ops); i++ {
		if err := m.Apply(&record.Record{Revision: kv.Revision(i + 1), Ops: []record.Op{ops[i]}}); err != nil {
			tb.Fatal(err)
		}
	}
	out := map[string]string{}
	for e := range m.All(nil, nil) {
		out[string(e.Key)] = string(e.Value)
	}
	return out
}

// inLostRange reports whether key lies strictly inside one of the ranges.
func inLostRange(key string, lost []snapshot.Lost) bool {
	for _, l := range lost {
		if (l.After == nil || key > string(l.After)) && (l.Before == nil || key < string(l.Before)) {
			return true
		}
	}
	return false
}

func filesOf(tb testing.TB, fsys vfs.FS) map[string]string { return dirFiles(tb, fsys, "/data") }

// matrixResult counts the outcomes of a run of the matrix.
type matrixResult struct {
	cases    int
	byKind   map[string]map[matrixOutcome]int
	problems []string
	cut      []string // cases opened with acknowledged records cut
}

func runMatrix(tb testing.TB, d *matrixDir, cs []matrixDamage, bug variant.Bug, maxProblems int) matrixResult {
	res := matrixResult{byKind: map[string]map[matrixOutcome]int{}}
	for _, c := range cs {
		res.cases++
		out, problems := d.runCase(tb, c, bug)
		if res.byKind[c.kind] == nil {
			res.byKind[c.kind] = map[matrixOutcome]int{}
		}
		if len(problems) > 0 {
			res.byKind[c.kind]["BAD"]++
			res.problems = append(res.problems, fmt.Sprintf("%s (%s): %s", c.name, c.expect, strings.Join(problems, "; ")))
			if len(res.problems) >= maxProblems {
				return res
			}
			continue
		}
		res.byKind[c.kind][out]++
		if out == cutTail {
			res.cut = append(res.cut, c.name)
		}
	}
	return res
}

func (r matrixResult) String() string {
	var b strings.Builder
	kinds := make([]string, 0, len(r.byKind))
	for k := range r.byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	fmt.Fprintf(&b, "%d cases\n", r.cases)
	for _, k := range kinds {
		outs := make([]string, 0, len(r.byKind[k]))
		total := 0
		for o, n := range r.byKind[k] {
			outs = append(outs, fmt.Sprintf("%s %d", o, n))
			total += n
		}
		slices.Sort(outs)
		fmt.Fprintf(&b, "  %-11s %5d: %s\n", k, total, strings.Join(outs, ", "))
	}
	return b.String()
}

// TestCorruptionMatrix runs every case of the matrix on the correct store,
// on both layouts.
func TestCorruptionMatrix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lay      matrixLayout
		minCases int
	}{{"many segments", manySegments, 2000}, {"one segment", oneSegment, 400}} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			d := prepareMatrix(t, tc.lay)
			res := runMatrix(t, d, d.cases(1), variant.None, 20)
			t.Logf("prepared: segments %v (newest %s), snapshot covers %s at revision %d, %d operations\n%s",
				d.segs, d.newest, d.covered, d.snapRev, len(d.ops), res)
			for _, p := range res.problems {
				t.Error(p)
			}
			if res.cases < tc.minCases {
				t.Errorf("only %d cases", res.cases)
			}
			for _, c := range res.cut {
				if !strings.HasPrefix(c, "truncate") {
					t.Logf("cut: %s", c)
				}
			}
		})
	}
}

// TestLengthFlipNewestSegment is the hard case: a flipped bit in the length
// field of a record in the middle of the newest segment makes the reader
// lose its place, and the rest of the segment could pass for a torn tail.
// Every such flip must be refused at the record's offset. In the prepared
// directory every record was synced on its own, so the next record's
// synced offset proves the damaged one durable; in a segment written as
// one group commit (every record with the same synced offset) the intact
// records after the damage, with no zeroed sector between, prove it.
func TestLengthFlipNewestSegment(t *testing.T) {
	d := prepareMatrix(t, manySegments)
	newest := wal.SegmentName(d.newest)
	var mid []int
	for rev := d.snapRev + 1; rev <= len(d.ops); rev++ {
		if d.recs[rev].file == newest {
			mid = append(mid, rev)
		}
	}
	if len(mid) < 3 {
		t.Fatalf("the newest segment holds %d records", len(mid))
	}
	loc := d.recs[mid[len(mid)/2]]
	var cs []matrixDamage
	for i := int64(4); i < 8; i++ {
		for bit := range 8 {
			off := loc.off + i
			cs = append(cs, matrixDamage{kind: "length", name: fmt.Sprintf("length byte %d bit %d of the record at %d", i-4, bit, loc.off),
				file: newest, first: off, expect: mustRefuse, errFile: newest, errFrom: loc.off,
				apply: func(files map[string][]byte) {
					b := slices.Clone(files[newest])
					b[off] ^= 1 << bit
					files[newest] = b
				}})
		}
	}
	res := runMatrix(t, d, cs, variant.None, 10)
	for _, p := range res.problems {
		t.Error(p)
	}
	if res.byKind["length"][refused] != 32 {
		t.Errorf("length flips: %v, want 32 refused", res.byKind["length"])
	}

	// One group commit: the records share their synced offset.
	t.Run("group commit", func(t *testing.T) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o700); err != nil {
			t.Fatal(err)
		}
		w, err := wal.Create(mem, "/data", 1, wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ops := faultOps(12)
		var payloads [][]byte
		for i, op := range ops {
			payloads = append(payloads, record.Append(nil, &record.Record{Revision: kv.Revision(i + 1), Ops: []record.Op{op}}))
		}
		pos, err := w.Append(payloads...)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		good, _ := vfs.ReadFile(mem, "/data/log.000001")
		// The sixth record of twelve.
		off := pos.Offset
		for _, p := range payloads[:5] {
			off += wal.HeaderSize + int64(len(p))
		}
		refusedN := 0
		for i := int64(4); i < 8; i++ {
			for bit := range 8 {
				b := slices.Clone(good)
				b[off+i] ^= 1 << bit
				fsys := memDirWith(t, map[string][]byte{"log.000001": b})
				_, err := kv.Open("/data", &kv.Options{FS: fsys})
				var ce *wal.CorruptError
				if !recovery.IsCorrupt(err) || !errors.As(err, &ce) || ce.Offset != off || path.Base(ce.File) != "log.000001" {
					t.Errorf("length byte %d bit %d: %v, want corruption of log.000001 at offset %d", i-4, bit, err, off)
					continue
				}
				refusedN++
			}
		}
		t.Logf("group commit: %d of 32 length flips refused at offset %d", refusedN, off)
	})
}

// TestCorruptionMatrixCatchesBugs runs parts of the matrix on bug
// variants: each must be caught. double-apply skips the checks of segment
// numbering and revisions, so a deleted or duplicated segment opens with a
// wrong map; trust-tmp loads a damaged snapshot.tmp and refuses a
// directory that a crashed checkpoint leaves.
func TestCorruptionMatrixCatchesBugs(t *testing.T) {
	tests := []struct {
		bug   variant.Bug
		kinds []string
	}{
		{variant.DoubleApply, []string{"delete", "duplicate"}},
		{variant.TrustTmp, []string{"stale-tmp"}},
	}
	d := prepareMatrix(t, manySegments)
	for _, tc := range tests {
		t.Run(string(tc.bug), func(t *testing.T) {
			var cs []matrixDamage
			for _, c := range d.cases(1) {
				if slices.Contains(tc.kinds, c.kind) {
					cs = append(cs, c)
				}
			}
			res := runMatrix(t, d, cs, tc.bug, 1000)
			if len(res.problems) == 0 {
				t.Fatalf("the %s variant passed the matrix's %v cases:\n%s", tc.bug, tc.kinds, res)
			}
			t.Logf("%s: %d of %d cases bad, first: %s", tc.bug, len(res.problems), res.cases, res.problems[0])
		})
	}
}

// onlyZerosReplaced reports whether after keeps every byte of before
// that is not a trailing zero: a record written where the log had
// reserved space loses nothing.
func onlyZerosReplaced(before, after string) bool {
	p := 0
	for p < len(before) && p < len(after) && before[p] == after[p] {
		p++
	}
	return strings.Trim(before[p:], "\x00") == ""
}
