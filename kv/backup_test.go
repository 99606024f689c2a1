package kv_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// fullEntry is an entry as the tests compare it: every field a Get
// returns, the bytes copied.
type fullEntry struct {
	Key, Value        string
	Create, Mod, Vers int64
}

func full(e kv.Entry) fullEntry {
	return fullEntry{string(e.Key), string(e.Value), int64(e.CreateRev), int64(e.ModRev), e.Version}
}

// storeEntries returns every entry of s, in key order.
func storeEntries(t testing.TB, s *kv.Store) []fullEntry {
	t.Helper()
	var out []fullEntry
	for e, err := range s.ScanErr(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full(e))
	}
	return out
}

// backupEntries decodes a backup held in memory.
func backupEntries(t testing.TB, b []byte) (kv.Digest, []fullEntry) {
	t.Helper()
	var out []fullEntry
	d, err := kv.DecodeBackup(b, func(e kv.Entry) error {
		out = append(out, full(e))
		return nil
	})
	if err != nil {
		t.Fatalf("DecodeBackup: %v", err)
	}
	return d, out
}

// writeFile puts b in fsys under name, durably.
func writeFile(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	if err := fsys.MkdirAll(path.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	err := vfs.Publish(fsys, path.Dir(name), path.Base(name), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// someWrites leaves s with keys of every shape: overwritten, deleted and
// re-created, counters, a transaction's.
func someWrites(t testing.TB, s *kv.Store) {
	t.Helper()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put([]byte("a"), []byte("1")))
	must(s.Put([]byte("b"), []byte("x")))
	must(s.Put([]byte("a"), []byte("2")))
	_, _, err := s.Add([]byte("c"), 5)
	must(nil, err)
	must(s.Delete([]byte("b")))
	must(s.Put([]byte("b"), []byte("again")))
	must(s.Txn(kv.Txn{Then: []kv.Op{kv.PutOp([]byte("t1"), []byte("")), kv.AddOp([]byte("c"), -2)}}))
	must(s.Put([]byte("\x00\xffbin"), bytes.Repeat([]byte{0}, 600)))
}

// TestBackupRoundTrip: a backup holds every entry of the store with its
// revisions and version, and its digest is the store's; restored, it
// opens to the same map at the same revision, and the next write gets
// the next revision.
func TestBackupRoundTrip(t *testing.T) {
	fsys := vfs.NewMem()
	opts := &kv.Options{FS: fsys}
	s, err := kv.Open("/d", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	someWrites(t, s)
	want := storeEntries(t, s)
	wantDigest, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if wantDigest.Revision != s.Revision() || wantDigest.Keys != int64(s.Len()) {
		t.Fatalf("Hash = %+v, store at revision %d with %d keys", wantDigest, s.Revision(), s.Len())
	}
	var buf bytes.Buffer
	rev, err := s.Backup(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if rev != s.Revision() {
		t.Errorf("Backup returned revision %d, store at %d", rev, s.Revision())
	}
	d, got := backupEntries(t, buf.Bytes())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backup entries (-store +backup):\n%s", diff)
	}
	if d != wantDigest {
		t.Errorf("backup digest %+v, store's %+v", d, wantDigest)
	}

	writeFile(t, fsys, "/backups/b1", buf.Bytes())
	rd, err := kv.ReadBackup("/backups/b1", opts, nil)
	if err != nil || rd != d {
		t.Fatalf("ReadBackup = %+v, %v; want %+v", rd, err, d)
	}
	rd, err = kv.Restore("/backups/b1", "/restored", opts)
	if err != nil || rd != d {
		t.Fatalf("Restore = %+v, %v; want %+v", rd, err, d)
	}
	r, err := kv.Open("/restored", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if diff := cmp.Diff(want, storeEntries(t, r)); diff != "" {
		t.Errorf("restored store (-store +restored):\n%s", diff)
	}
	if r.Revision() != rev {
		t.Errorf("restored store at revision %d, backup at %d", r.Revision(), rev)
	}
	next, err := r.Put([]byte("after"), []byte("restore"))
	if err != nil || next != rev+1 {
		t.Errorf("first write after the restore: revision %d, %v; want %d", next, err, rev+1)
	}
	// The restored directory is a store like another: it survives a
	// checkpoint and a reopen.
	if err := r.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r2, err := kv.Open("/restored", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if e, err := r2.Get([]byte("after")); err != nil || e.ModRev != rev+1 {
		t.Errorf("after a reopen: %+v, %v", e, err)
	}
}

// TestBackupEmptyAndClosed: the backup of an empty store restores to an
// empty store at revision 0; a closed store's Backup and Hash fail.
func TestBackupEmptyAndClosed(t *testing.T) {
	fsys := vfs.NewMem()
	opts := &kv.Options{FS: fsys}
	s, err := kv.Open("/d", opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if rev, err := s.Backup(&buf); err != nil || rev != 0 {
		t.Fatalf("Backup of an empty store = %d, %v", rev, err)
	}
	s.Close()
	if _, err := s.Backup(io.Discard); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Backup after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Hash(); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Hash after Close: %v, want ErrClosed", err)
	}
	writeFile(t, fsys, "/b", buf.Bytes())
	d, err := kv.Restore("/b", "/r", opts)
	if err != nil || d.Revision != 0 || d.Keys != 0 || d.Hash != (record.NewMap().Hash()) {
		t.Fatalf("Restore of an empty backup = %+v, %v", d, err)
	}
	r, err := kv.Open("/r", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rev, err := r.Put([]byte("k"), []byte("v")); err != nil || rev != 1 {
		t.Errorf("first write: %d, %v", rev, err)
	}
}

// TestBackupReadOnly: a store opened read-only beside a writer backs up
// what it recovered.
func TestBackupReadOnly(t *testing.T) {
	fsys := vfs.NewMem()
	s, err := kv.Open("/d", &kv.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	someWrites(t, s)
	if err := s.Sync(); err != nil { // the mark that vouches for the last group
		t.Fatal(err)
	}
	ro, err := kv.Open("/d", &kv.Options{FS: fsys, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var buf bytes.Buffer
	rev, err := ro.Backup(&buf)
	if err != nil || rev != s.Revision() {
		t.Fatalf("read-only Backup = %d, %v; writer at %d", rev, err, s.Revision())
	}
	_, got := backupEntries(t, buf.Bytes())
	if diff := cmp.Diff(storeEntries(t, s), got); diff != "" {
		t.Errorf("read-only backup (-writer +backup):\n%s", diff)
	}
}

// backupFrames parses a backup's frames as FORMAT.md lays them out (an
// 8-byte header, then frames of a 9-byte header and a payload) and
// returns each frame's offset.
func backupFrames(b []byte) []int64 {
	var out []int64
	for off := int64(8); off+9 <= int64(len(b)); {
		out = append(out, off)
		off += 9 + int64(binary.LittleEndian.Uint32(b[off+4:]))
	}
	return out
}

// TestBackupDamaged: a backup with any byte changed, cut at any length,
// or with bytes after its end is refused, naming the file and the offset
// of the frame that holds the damage; Restore writes nothing of it.
func TestBackupDamaged(t *testing.T) {
	fsys := vfs.NewMem()
	opts := &kv.Options{FS: fsys}
	s, err := kv.Open("/d", opts)
	if err != nil {
		t.Fatal(err)
	}
	someWrites(t, s)
	var buf bytes.Buffer
	if _, err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	s.Close()
	good := buf.Bytes()
	starts := backupFrames(good)
	frameOf := func(i int64) int64 {
		at := int64(0)
		for _, s := range starts {
			if s <= i {
				at = s
			}
		}
		return at
	}
	check := func(t *testing.T, b []byte, wantErr error, wantOff int64) {
		t.Helper()
		_, err := kv.DecodeBackup(b, nil)
		var ce *kv.CorruptError
		if !errors.Is(err, wantErr) || !errors.As(err, &ce) {
			t.Fatalf("DecodeBackup: %v, want %v in a *kv.CorruptError", err, wantErr)
		}
		if ce.File != "backup" || ce.Offset != wantOff {
			t.Errorf("DecodeBackup: %v names %s offset %d, want backup offset %d", err, ce.File, ce.Offset, wantOff)
		}
		if wantErr == kv.ErrBackupCorrupt && !recovery.IsCorrupt(err) {
			t.Errorf("%v is not corruption", err)
		}
	}
	t.Run("bit flips", func(t *testing.T) {
		for i := range int64(len(good)) {
			b := slices.Clone(good)
			b[i] ^= 0x10
			want, off := kv.ErrBackupCorrupt, frameOf(i)
			switch {
			case i < 6: // the magic
				off = 0
			case i < 8:
				want, off = kv.ErrBackupVersion, 6
			}
			t.Run(fmt.Sprint(i), func(t *testing.T) { check(t, b, want, off) })
		}
	})
	t.Run("cut short", func(t *testing.T) {
		for n := range int64(len(good)) {
			off := n
			if n >= 8 {
				if s := frameOf(n); n >= s+9 {
					off = s // the frame's length runs past the end
				}
			}
			t.Run(fmt.Sprint(n), func(t *testing.T) { check(t, good[:n], kv.ErrBackupCorrupt, off) })
		}
	})
	t.Run("bytes after the end", func(t *testing.T) {
		check(t, append(slices.Clone(good), 0), kv.ErrBackupCorrupt, int64(len(good)))
	})
	// Restore of a damaged backup: the same error, naming the file, and
	// the directory holds nothing but its lock.
	for _, tc := range []struct {
		name string
		b    []byte
		off  int64
	}{
		{"a byte of the last entry", func() []byte { b := slices.Clone(good); b[starts[len(starts)-2]+20] ^= 1; return b }(), starts[len(starts)-2]},
		{"the end frame's checksum", func() []byte { b := slices.Clone(good); b[len(b)-1] ^= 1; return b }(), starts[len(starts)-1]},
		{"cut in the end frame", good[:len(good)-3], starts[len(starts)-1]},
	} {
		t.Run("restore/"+tc.name, func(t *testing.T) {
			writeFile(t, fsys, "/bad", tc.b)
			dir := "/r-" + tc.name
			_, err := kv.Restore("/bad", dir, opts)
			var ce *kv.CorruptError
			if !errors.Is(err, kv.ErrBackupCorrupt) || !errors.As(err, &ce) || ce.File != "/bad" || ce.Offset != tc.off {
				t.Fatalf("Restore: %v, want ErrBackupCorrupt at /bad offset %d", err, tc.off)
			}
			names, err := fsys.List(dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{kv.LockName}, names); diff != "" {
				t.Errorf("files left (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRestoreRefuses: Restore makes new directories only.
func TestRestoreRefuses(t *testing.T) {
	fsys := vfs.NewMem()
	opts := &kv.Options{FS: fsys}
	s, err := kv.Open("/d", opts)
	if err != nil {
		t.Fatal(err)
	}
	someWrites(t, s)
	var buf bytes.Buffer
	if _, err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	s.Close() // an open store marks its log when idle: the files must stay still
	writeFile(t, fsys, "/b", buf.Bytes())
	writeFile(t, fsys, "/other/notes.txt", []byte("mine"))
	writeFile(t, fsys, "/afile", []byte("x"))
	for _, tc := range []struct {
		name, dir string
		want      error
	}{
		{"a store", "/d", kv.ErrRestoreNotEmpty},
		{"a directory with a file", "/other", kv.ErrRestoreNotEmpty},
		{"a file", "/afile", nil},
		{"a missing backup", "/new", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotFS(t, fsys)
			file := "/b"
			if tc.name == "a missing backup" {
				file = "/nope"
			}
			_, err := kv.Restore(file, tc.dir, opts)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Restore into %s: %v, want %v", tc.dir, err, tc.want)
			}
			if diff := cmp.Diff(before, snapshotFS(t, fsys)); diff != "" {
				t.Errorf("Restore changed files (-before +after):\n%s", diff)
			}
		})
	}
}

// snapshotFS returns every file under / of fsys with its contents.
func snapshotFS(t testing.TB, fsys vfs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := path.Join(dir, n)
			fi, err := fsys.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				walk(p)
				continue
			}
			b, err := vfs.ReadFile(fsys, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = string(b)
		}
	}
	walk("/")
	return out
}

// TestRestoreCrash: a restore that dies after any of its file operations
// leaves, in the process-crash state and in the power-loss state that
// keeps nothing unsynced, a directory that opens empty or is refused,
// never one that opens to another map than the backup's; once Restore
// returned, a power loss keeps the restored store. Without its directory
// syncs (the no-dirsync variant), the last fails.
func TestRestoreCrash(t *testing.T) {
	if problems, outcomes := restoreCrashes(t, variant.None, 0); len(problems) > 0 {
		t.Errorf("%d bad states; the first: %s", len(problems), problems[0])
	} else if outcomes["the backup's map"] == 0 || outcomes["refused or absent"] == 0 || outcomes["empty"] == 0 {
		t.Errorf("too few kinds of crash states: %v", outcomes)
	}
	t.Run("no-dirsync is caught", func(t *testing.T) {
		if !variant.Enabled {
			t.Skip("a kvrelease build has no variants")
		}
		problems, _ := restoreCrashes(t, variant.NoDirSync, 0)
		if len(problems) == 0 {
			t.Fatal("no bad state without directory syncs")
		}
		t.Logf("%d bad states; the first: %s", len(problems), problems[0])
	})
}

// restoreCrashes crashes a Restore after each of its file operations in
// turn, and returns what is wrong with the states it leaves, and how
// many of each kind of state there were. With a floor (above the
// backup's revision), it restores with RestoreAbove(floor): a state that
// opens to the backup's map must be at the floor, never below it.
func restoreCrashes(t *testing.T, bug variant.Bug, floor kv.Revision) (problems []string, outcomes map[string]int) {
	base := vfs.NewMem()
	s, err := kv.Open("/d", &kv.Options{FS: base})
	if err != nil {
		t.Fatal(err)
	}
	someWrites(t, s)
	var buf bytes.Buffer
	if _, err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	s.Close()
	writeFile(t, base, "/b", buf.Bytes())
	want, _ := backupEntries(t, buf.Bytes())
	var ropts []kv.RestoreOption
	if floor > 0 {
		if floor <= want.Revision {
			t.Fatalf("a floor of %d is not above the backup's revision %d", floor, want.Revision)
		}
		ropts = append(ropts, kv.RestoreAbove(floor))
		want.Revision = floor
	}
	errDied := errors.New("died")
	outcomes = map[string]int{}
	for n := 0; ; n++ {
		fsys := base.Clone()
		rule, crashed := vfs.CrashAfter(n, errDied)
		_, rerr := kv.Restore("/b", "/r", &kv.Options{FS: variant.Wrap(&vfs.Inject{FS: fsys, Rule: rule}, bug)}, ropts...)
		finished := !crashed()
		if finished && rerr != nil {
			t.Fatalf("Restore with no crash: %v", rerr)
		}
		for _, st := range []struct {
			name string
			fs   *vfs.MemFS
		}{{"process", fsys.Clone()}, {"power", fsys.CrashClone()}} {
			where := fmt.Sprintf("%s crash after %d operations", st.name, n)
			if finished {
				where = fmt.Sprintf("%s crash after Restore returned", st.name)
			}
			r, err := kv.Open("/r", &kv.Options{FS: st.fs, ReadOnly: true})
			if errors.Is(err, kv.ErrNoStore) && !finished {
				// The directory is missing or holds no store yet: a
				// read-only open creates nothing.
				outcomes["empty"]++
				continue
			}
			if err != nil {
				if finished {
					problems = append(problems, fmt.Sprintf("%s: the restored store does not open: %v", where, err))
				} else if !recovery.IsCorrupt(err) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, kv.ErrNotDataDir) {
					problems = append(problems, fmt.Sprintf("%s: open fails with %v, which is neither refusal nor absence", where, err))
				}
				outcomes["refused or absent"]++
				continue
			}
			d, err := r.Hash()
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case d == want:
				outcomes["the backup's map"]++
			case finished:
				problems = append(problems, fmt.Sprintf("%s: the restored store holds %+v, the backup %+v", where, d, want))
			case d.Keys == 0 && d.Leases == 0 && (d.Revision == 0 || floor > 0 && d.Revision == floor):
				// Empty; with a floor, perhaps at the floor already: the
				// segment with the skip is durable before the snapshot
				// is in place.
				outcomes["empty"]++
			case floor > 0 && d.Hash == want.Hash && d.Revision < floor:
				problems = append(problems, fmt.Sprintf("%s: the backup's map at revision %d, below the floor %d", where, d.Revision, floor))
			default:
				problems = append(problems, fmt.Sprintf("%s: a store with another map: %+v, the backup %+v", where, d, want))
			}
		}
		if finished {
			break
		}
	}
	t.Logf("outcomes: %v", outcomes)
	return problems, outcomes
}

// modelEntry is a key's state in the test's own model of the store.
type modelEntry struct {
	value             string
	create, mod, vers int64
}

// committed is one acknowledged write: its revision and operations.
type committed struct {
	rev kv.Revision
	ops []kv.Op
}

// modelAt applies the records up to rev, in revision order, to an empty
// map, with the store's rules written out here (FORMAT.md, "Data record
// payload"): a put or add on an existing key keeps its create revision
// and adds one to its version; a delete forgets it; an add to a missing
// key starts from 0.
func modelAt(t testing.TB, recs []committed, rev kv.Revision) []fullEntry {
	t.Helper()
	m := map[string]modelEntry{}
	for _, c := range recs {
		if c.rev > rev {
			break
		}
		for _, op := range c.ops {
			k := string(op.Key)
			old, ok := m[k]
			next := modelEntry{create: int64(c.rev), mod: int64(c.rev), vers: 1}
			if ok {
				next.create, next.vers = old.create, old.vers+1
			}
			switch op.Kind {
			case record.KindPut:
				next.value = string(op.Value)
			case record.KindDelete:
				delete(m, k)
				continue
			case record.KindAdd:
				n := int64(0)
				if ok {
					var err error
					if n, err = strconv.ParseInt(old.value, 10, 64); err != nil {
						t.Fatalf("add to %q = %q at revision %d", k, old.value, c.rev)
					}
				}
				next.value = strconv.FormatInt(n+op.Delta, 10)
			}
			m[k] = next
		}
	}
	var out []fullEntry
	for k, e := range m {
		out = append(out, fullEntry{k, e.value, e.create, e.mod, e.vers})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// midWrite runs writers on a store while a goroutine takes backups, and
// returns the acknowledged writes in revision order and the backups.
// Each of the six writers makes midWriteOps writes (or fewer, if the
// backups are done first), and the backups are spread over them by
// count: backup b is taken once the writers have committed b+1 shares of
// the writes, so the run's size does not depend on the machine's speed.
func midWrite(t *testing.T, fsys vfs.FS, backups int) ([]committed, [][]byte) {
	const writers, midWriteOps = 6, 1000
	s, err := kv.Open("/d", &kv.Options{FS: fsys, SegmentSize: 16 << 10, CheckpointBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var recs []committed
	note := func(rev kv.Revision, ops ...kv.Op) {
		mu.Lock()
		recs = append(recs, committed{rev, ops})
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var tried, running atomic.Int64
	running.Store(writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range midWriteOps {
				tried.Add(1)
				select {
				case <-stop:
					return
				default:
				}
				plain := []byte(fmt.Sprintf("k%02d", rng.IntN(24)))
				counter := []byte(fmt.Sprintf("c%d", rng.IntN(6)))
				value := []byte(fmt.Sprintf("w%d-%d", w, i))
				switch rng.IntN(6) {
				case 0, 1:
					if rev, err := s.Put(plain, value); err == nil {
						note(rev, kv.PutOp(plain, value))
					}
				case 2:
					d := int64(rng.IntN(9) + 1)
					if _, rev, err := s.Add(counter, d); err == nil {
						note(rev, kv.AddOp(counter, d))
					}
				case 3:
					k := plain
					if rng.IntN(2) == 0 {
						k = counter
					}
					if rev, err := s.Delete(k); err == nil {
						note(rev, kv.DeleteOp(k))
					}
				default:
					ops := []kv.Op{kv.PutOp(plain, value), kv.AddOp(counter, 1)}
					if res, err := s.Txn(kv.Txn{Then: ops}); err == nil {
						note(res.Revision, ops...)
					}
				}
			}
		}()
	}
	var out [][]byte
	for b := range backups {
		for tried.Load() < int64((b+1)*writers*midWriteOps/(backups+1)) && running.Load() > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		var buf bytes.Buffer
		if _, err := s.Backup(&buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	close(stop)
	wg.Wait()
	sort.Slice(recs, func(i, j int) bool { return recs[i].rev < recs[j].rev })
	return recs, out
}

// TestBackupMidWrite: backups taken while six writers commit puts, adds,
// deletes and transactions, with checkpoints racing them, each hold
// exactly the map that the acknowledged writes up to the backup's
// revision leave, by a model of the committed history; restored, each
// opens to that map.
func TestBackupMidWrite(t *testing.T) {
	check := func(t *testing.T, bug variant.Bug) (bad int, first string) {
		fsys := vfs.NewMem()
		recs, backups := midWrite(t, variant.Wrap(fsys, bug), 6)
		for i, c := range recs {
			if c.rev != kv.Revision(i+1) {
				t.Fatalf("the acknowledged writes skip from revision %d to %d", i, c.rev)
			}
		}
		t.Logf("%d writes, %d backups", len(recs), len(backups))
		for i, b := range backups {
			d, got := backupEntries(t, b)
			want := modelAt(t, recs, d.Revision)
			if diff := cmp.Diff(want, got); diff != "" {
				bad++
				if first == "" {
					first = fmt.Sprintf("backup %d at revision %d (-model +backup):\n%s", i, d.Revision, diff)
				}
				continue
			}
			if bug != variant.None {
				continue
			}
			name := fmt.Sprintf("/b%d", i)
			writeFile(t, fsys, name, b)
			dir := fmt.Sprintf("/r%d", i)
			if _, err := kv.Restore(name, dir, &kv.Options{FS: fsys}); err != nil {
				t.Fatal(err)
			}
			r, err := kv.Open(dir, &kv.Options{FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, storeEntries(t, r)); diff != "" {
				t.Errorf("restored backup %d (-backup +restored):\n%s", i, diff)
			}
			if rev, err := r.Put([]byte("next"), nil); err != nil || rev != d.Revision+1 {
				t.Errorf("restored backup %d: next write at %d, %v; want %d", i, rev, err, d.Revision+1)
			}
			r.Close()
		}
		return bad, first
	}
	if bad, first := check(t, variant.None); bad > 0 {
		t.Errorf("%d backups are not the map at their revision; the first: %s", bad, first)
	}
	t.Run("backup-live is caught", func(t *testing.T) {
		if !variant.Enabled {
			t.Skip("a kvrelease build has no variants")
		}
		bad, first := check(t, variant.BackupLive)
		if bad == 0 {
			t.Fatal("every backup of the backup-live variant matched the model")
		}
		t.Logf("%d bad; the first: %s", bad, first)
	})
}
