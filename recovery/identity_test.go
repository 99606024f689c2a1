package recovery_test

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// putFile writes name in fsys with contents b.
func putFile(tb testing.TB, fsys vfs.FS, name string, b []byte) {
	tb.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// markedStore returns a directory holding a store made by Recover, with
// the article's records in its first segment.
func markedStore(tb testing.TB) (*vfs.MemFS, string) {
	tb.Helper()
	fsys, dir := newDir(tb)
	writeLog(tb, fsys, dir, 1, 1, articleOps())
	res, err := recovery.Recover(fsys, dir, recovery.Options{DeferCheckpoint: true})
	if err != nil {
		tb.Fatal(err)
	}
	res.Writer.Close()
	if !res.Marked {
		tb.Fatal("the recovery of a store without a marker did not write one")
	}
	return fsys, dir
}

// TestIdentify: what a directory is, from its listing and the first bytes
// of the store's files, and nothing is changed by asking.
func TestIdentify(t *testing.T) {
	segHeader := func(fsys vfs.FS, dir string) []byte {
		b, _ := readAll(fsys, wal.SegmentPath(dir, 1))
		return b
	}
	tests := []struct {
		name    string
		setup   func(fsys *vfs.MemFS, dir string)
		dir     string // default /data
		want    recovery.DirKind
		wantErr error
	}{
		{name: "missing", dir: "/nowhere", want: recovery.DirMissing},
		{name: "empty", want: recovery.DirEmpty},
		{name: "a LOCK left by a store whose creation failed", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, dir+"/LOCK", []byte("123\n")) }},
		{name: "a mount point's lost+found", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) { fsys.MkdirAll(dir+"/lost+found", 0o700) }},
		{name: "an empty first segment (a crash while creating it)", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, wal.SegmentPath(dir, 1), nil) }},
		{name: "a zeroed first segment (its header lost)", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, wal.SegmentPath(dir, 1), make([]byte, 4096)) }},
		{name: "a first segment cut short in its header", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) {
				writeLog(t, fsys, dir, 1, 1, nil)
				b := segHeader(fsys, dir)[:20]
				fsys.Remove(wal.SegmentPath(dir, 1))
				putFile(t, fsys, wal.SegmentPath(dir, 1), b)
			}},
		{name: "a snapshot.tmp cut short (a restore that crashed)", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, dir+"/snapshot.tmp", []byte("KVSNAP\x01")) }},
		{name: "an empty snapshot.tmp", want: recovery.DirEmpty,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, dir+"/snapshot.tmp", nil) }},
		{name: "a text file named snapshot.tmp", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, dir+"/snapshot.tmp", []byte("draft")) }},
		{name: "a text file named log.000001", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) {
				putFile(t, fsys, wal.SegmentPath(dir, 1), []byte("my notes\n"))
			}},
		{name: "a short text file named log.000001", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, wal.SegmentPath(dir, 1), []byte("x")) }},
		{name: "a text file named snapshot", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, dir+"/snapshot", []byte("photo")) }},
		{name: "a folder named snapshot", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) { fsys.MkdirAll(dir+"/snapshot", 0o700) }},
		{name: "a folder named log.000001", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) { fsys.MkdirAll(wal.SegmentPath(dir, 1), 0o700) }},
		{name: "a folder named snapshot beside a segment", want: recovery.DirUnmarked,
			setup: func(fsys *vfs.MemFS, dir string) {
				writeLog(t, fsys, dir, 1, 1, articleOps())
				fsys.MkdirAll(dir+"/snapshot", 0o700)
			}},
		{name: "a folder of notes", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) {
				putFile(t, fsys, dir+"/todo.txt", []byte("buy milk\n"))
				putFile(t, fsys, dir+"/ideas.md", []byte("# ideas\n"))
			}},
		{name: "a folder of notes with a LOCK an old kv left", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) {
				putFile(t, fsys, dir+"/LOCK", []byte("123\n"))
				putFile(t, fsys, dir+"/todo.txt", []byte("buy milk\n"))
			}},
		{name: "a file, not a directory", dir: "/data/todo.txt", wantErr: recovery.ErrNotDataDir,
			setup: func(fsys *vfs.MemFS, dir string) { putFile(t, fsys, dir+"/todo.txt", []byte("buy milk\n")) }},
		{name: "a store made before the marker", want: recovery.DirUnmarked,
			setup: func(fsys *vfs.MemFS, dir string) { writeLog(t, fsys, dir, 1, 1, articleOps()) }},
		{name: "a store made before the marker, its header damaged", want: recovery.DirUnmarked,
			setup: func(fsys *vfs.MemFS, dir string) {
				writeLog(t, fsys, dir, 1, 1, articleOps())
				b := segHeader(fsys, dir)
				b[30] ^= 1
				rewrite(t, fsys, wal.SegmentPath(dir, 1), b)
			}},
		{name: "a marked store", want: recovery.DirMarked,
			setup: func(fsys *vfs.MemFS, dir string) {
				putFile(t, fsys, dir+"/"+recovery.MarkerName, []byte(recovery.MarkerContent()))
			}},
		{name: "a damaged marker", want: recovery.DirMarked, wantErr: recovery.ErrMarkerCorrupt,
			setup: func(fsys *vfs.MemFS, dir string) {
				b := []byte(recovery.MarkerContent())
				b[len(b)-2] ^= 1
				putFile(t, fsys, dir+"/"+recovery.MarkerName, b)
			}},
		{name: "a marker of a later version", want: recovery.DirMarked, wantErr: recovery.ErrMarkerVersion,
			setup: func(fsys *vfs.MemFS, dir string) {
				putFile(t, fsys, dir+"/"+recovery.MarkerName, []byte(recovery.MarkerBytes(2)))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, dir := newDir(t)
			if tt.setup != nil {
				tt.setup(fsys, dir)
			}
			if tt.dir != "" {
				dir = tt.dir
			}
			before := fsys.Clone()
			got, err := recovery.Identify(fsys, dir)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Identify: %v, want %v", err, tt.wantErr)
			}
			if err == nil || errors.Is(err, recovery.ErrMarkerCorrupt) || errors.Is(err, recovery.ErrMarkerVersion) {
				if got != tt.want {
					t.Errorf("Identify = %v, want %v", got, tt.want)
				}
			}
			if errors.Is(err, recovery.ErrMarkerCorrupt) != recovery.IsCorrupt(err) {
				t.Errorf("%v: IsCorrupt is %v", err, recovery.IsCorrupt(err))
			}
			if diff := cmp.Diff(regularFiles(t, before, "/data"), regularFiles(t, fsys, "/data")); diff != "" {
				t.Errorf("Identify changed files (-before +after):\n%s", diff)
			}
		})
	}
}

// TestNotDataDirRefused: Recover, Check and PlanRepair refuse a directory
// that is not a store, name it and a few of its files, and change nothing.
func TestNotDataDirRefused(t *testing.T) {
	fsys, dir := newDir(t)
	putFile(t, fsys, wal.SegmentPath(dir, 1), []byte("hello world this is a note\nline two of my notes\n"))
	putFile(t, fsys, dir+"/todo.txt", []byte("buy milk\n"))
	want := files(t, fsys, dir)
	_, err := recovery.Recover(fsys, dir, recovery.Options{})
	var nd *recovery.NotDataDirError
	if !errors.As(err, &nd) || !errors.Is(err, recovery.ErrNotDataDir) {
		t.Fatalf("Recover: %v, want a *NotDataDirError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "not a kv data directory: /data") || !strings.Contains(msg, `"log.000001"`) || !strings.Contains(msg, `"todo.txt"`) {
		t.Errorf("the error does not name the directory and its files: %v", err)
	}
	if _, err := recovery.Check(fsys, dir); !errors.Is(err, recovery.ErrNotDataDir) {
		t.Errorf("Check: %v", err)
	}
	if _, err := recovery.PlanRepair(fsys, dir); !errors.Is(err, recovery.ErrNotDataDir) {
		t.Errorf("PlanRepair: %v", err)
	}
	if diff := cmp.Diff(want, files(t, fsys, dir)); diff != "" {
		t.Errorf("files changed (-want +got):\n%s", diff)
	}
}

// TestNoCreate: with NoCreate (or ReadOnly) a missing or empty directory is
// ErrNoStore, and nothing is created; without, Recover creates a store
// whose marker comes after its first segment.
func TestNoCreate(t *testing.T) {
	for _, opts := range []recovery.Options{{NoCreate: true}, {ReadOnly: true}} {
		fsys, dir := newDir(t)
		for _, d := range []string{dir, "/missing"} {
			_, err := recovery.Recover(fsys, d, opts)
			var ns *recovery.NoStoreError
			if !errors.As(err, &ns) || !errors.Is(err, recovery.ErrNoStore) || ns.Missing != (d == "/missing") {
				t.Errorf("Recover(%s, %+v): %v, want a *NoStoreError", d, opts, err)
			}
		}
		if names := mustList(t, fsys, dir); len(names) != 0 {
			t.Errorf("%+v: files created: %v", opts, names)
		}
		if _, err := fsys.Stat("/missing"); err == nil {
			t.Errorf("%+v: the missing directory was created", opts)
		}
	}
	fsys, dir := newDir(t)
	if _, err := recovery.Check(fsys, dir); !errors.Is(err, recovery.ErrNoStore) {
		t.Errorf("Check of an empty directory: %v, want ErrNoStore", err)
	}
	rec := vfs.NewRecorder(fsys, nil)
	res, err := recovery.Recover(rec, dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	if !res.Created || !res.Marked {
		t.Errorf("Created %v, Marked %v; want both", res.Created, res.Marked)
	}
	// The marker is published after the first segment's name is durable.
	var order []string
	for _, e := range rec.Events() {
		if e.Kind == vfs.EvDirSync || e.Op == "rename" && path.Base(e.Path) == recovery.MarkerName+".tmp" {
			order = append(order, e.String())
		}
	}
	if len(order) < 2 || order[0] != "fsync data/" {
		t.Errorf("events %v: the first segment's directory sync must precede the marker's rename", order)
	}
}

// TestMarkedStoreLostItsSegments: a marked directory without a snapshot
// and without segments lost its first segment: Recover and Check refuse it,
// naming log.000001.
func TestMarkedStoreLostItsSegments(t *testing.T) {
	fsys, dir := markedStore(t)
	for _, n := range mustList(t, fsys, dir) {
		if _, ok := wal.ParseSegmentName(n); ok {
			fsys.Remove(path.Join(dir, n))
		}
	}
	_, err := recovery.Recover(fsys, dir, recovery.Options{})
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || !recovery.IsCorrupt(err) || ce.File != wal.SegmentPath(dir, 1) {
		t.Fatalf("Recover: %v, want corruption naming log.000001", err)
	}
	rep, err := recovery.Check(fsys, dir)
	if err != nil || rep.Clean() {
		t.Fatalf("Check: %v, problems %v", err, rep.Problems)
	}
}

// TestAdoption: a store made before the marker existed is read as it is;
// a writable Recover adds the marker, a read-only one writes nothing.
func TestAdoption(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	before := files(t, fsys, dir)
	res, err := recovery.Recover(fsys, dir, recovery.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Marked || !cmp.Equal(before, files(t, fsys, dir)) {
		t.Error("a read-only recovery changed the directory")
	}
	res, err = recovery.Recover(fsys, dir, recovery.Options{DeferCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	if !res.Marked || res.Created {
		t.Errorf("Marked %v, Created %v; want the store adopted", res.Marked, res.Created)
	}
	if k, err := recovery.Identify(fsys, dir); k != recovery.DirMarked || err != nil {
		t.Errorf("after adoption: %v, %v", k, err)
	}
	if diff := cmp.Diff(articleWant, dump(res.Map)); diff != "" {
		t.Errorf("map (-want +got):\n%s", diff)
	}
}

// TestMarkerRepair: a damaged marker is corruption that Check reports and
// PlanRepair mends, keeping the damaged one as evidence and every record.
func TestMarkerRepair(t *testing.T) {
	fsys, dir := markedStore(t)
	name := path.Join(dir, recovery.MarkerName)
	b, _ := readAll(fsys, name)
	b[3] ^= 0x20
	rewrite(t, fsys, name, b)
	_, err := recovery.Recover(fsys, dir, recovery.Options{})
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, recovery.ErrMarkerCorrupt) || ce.File != name || ce.Offset != 3 {
		t.Fatalf("Recover: %v, want ErrMarkerCorrupt at %s offset 3", err, name)
	}
	plan, err := recovery.PlanRepair(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(fsys, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(fsys, name+recovery.BrokenSuffix); string(got) != string(b) {
		t.Errorf("evidence %q, want the damaged marker %q", got, b)
	}
	res, err := recovery.Recover(fsys, dir, recovery.Options{DeferCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	res.Writer.Close()
	if diff := cmp.Diff(articleWant, dump(res.Map)); diff != "" {
		t.Errorf("map (-want +got):\n%s", diff)
	}
	if res.Map.Revision() != plan.Skip || plan.KeepThrough != 17 {
		t.Errorf("revision %d after a repair that keeps %d and skips to %d", res.Map.Revision(), plan.KeepThrough, plan.Skip)
	}
}

// regularFiles returns the regular files in dir with their bytes, and the
// directories with "<dir>".
func regularFiles(tb testing.TB, fsys vfs.FS, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, n := range mustList(tb, fsys, dir) {
		if fi, err := fsys.Stat(path.Join(dir, n)); err == nil && fi.IsDir() {
			out[n] = "<dir>"
			continue
		}
		b, err := vfs.ReadFile(fsys, path.Join(dir, n))
		if err != nil {
			tb.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// TestMarkerMatchesFormat: the marker's bytes are the ones FORMAT.md
// gives, and its checksum line is the CRC-32C of the two lines before it,
// computed here from the spec's words, not the code's.
func TestMarkerMatchesFormat(t *testing.T) {
	spec, err := os.ReadFile("../FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(spec), "### What is a data directory")
	if !ok {
		t.Fatal("FORMAT.md has no section on the marker")
	}
	_, block, _ := strings.Cut(rest, "```\n")
	block, _, _ = strings.Cut(block, "```")
	want := strings.ReplaceAll(strings.ReplaceAll(block, "\\n\n", "\n"), "\\n", "\n")
	if got := recovery.MarkerContent(); got != want {
		t.Errorf("marker %q, FORMAT.md says %q", got, want)
	}
	lines := strings.SplitAfter(want, "\n")
	sum := crc32.Checksum([]byte(lines[0]+lines[1]), crc32.MakeTable(crc32.Castagnoli))
	if lines[2] != fmt.Sprintf("crc32c %08x\n", sum) {
		t.Errorf("FORMAT.md's checksum line %q, want crc32c %08x", lines[2], sum)
	}
	if n := len(want); !strings.Contains(rest, fmt.Sprintf("(%d of them)", n)) {
		t.Errorf("FORMAT.md does not say the marker is %d bytes", n)
	}
}

// FuzzMarker feeds arbitrary bytes to Identify as the marker: it never
// panics, accepts only the marker's bytes, reports the rest as damage at
// an offset within the file, and calls a marker of another version that
// only when its checksum holds.
func FuzzMarker(f *testing.F) {
	m := recovery.MarkerContent()
	f.Add([]byte(m))
	f.Add([]byte(m[:20]))
	f.Add([]byte(recovery.MarkerBytes(2)))
	f.Add([]byte(m + "x"))
	f.Add([]byte("kv data directory\nversion 7\ncrc32c 00000000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys, dir := newDir(t)
		putFile(t, fsys, path.Join(dir, recovery.MarkerName), data)
		kind, err := recovery.Identify(fsys, dir)
		if kind != recovery.DirMarked {
			t.Fatalf("kind %v", kind)
		}
		var ce *wal.CorruptError
		switch {
		case err == nil:
			if string(data) != m {
				t.Fatalf("accepted %q", data)
			}
		case errors.Is(err, recovery.ErrMarkerVersion):
			if string(data) == m || !strings.HasPrefix(string(data), "kv data directory\nversion ") {
				t.Fatalf("%q: %v", data, err)
			}
		case errors.As(err, &ce) && recovery.IsCorrupt(err):
			if ce.Offset < 0 || ce.Offset > int64(len(data)) {
				t.Fatalf("%q: offset %d", data, ce.Offset)
			}
		default:
			t.Fatalf("%q: %v", data, err)
		}
	})
}

// TestIdentifyShortcut: Identify reads a store's marker before it lists
// the directory; on every kind of directory, on the OS's file system and
// the in-memory one, its answer and error are those of the listing.
func TestIdentifyShortcut(t *testing.T) {
	marker := []byte(recovery.MarkerContent())
	damaged := slices.Clone(marker)
	damaged[len(damaged)-2] ^= 1
	setups := []struct {
		name  string
		setup func(tb testing.TB, fsys vfs.FS, dir string) string // the directory to ask about
	}{
		{"missing", func(_ testing.TB, _ vfs.FS, dir string) string { return dir + "/nowhere" }},
		{"missing parent", func(_ testing.TB, _ vfs.FS, dir string) string { return dir + "/a/b" }},
		{"empty", func(_ testing.TB, _ vfs.FS, dir string) string { return dir }},
		{"a file", func(tb testing.TB, fsys vfs.FS, dir string) string {
			putFile(tb, fsys, dir+"/todo.txt", []byte("buy milk\n"))
			return dir + "/todo.txt"
		}},
		{"under a file", func(tb testing.TB, fsys vfs.FS, dir string) string {
			putFile(tb, fsys, dir+"/todo.txt", []byte("buy milk\n"))
			return dir + "/todo.txt/sub"
		}},
		{"a folder of notes", func(tb testing.TB, fsys vfs.FS, dir string) string {
			putFile(tb, fsys, dir+"/todo.txt", []byte("buy milk\n"))
			return dir
		}},
		{"a marked store", func(tb testing.TB, fsys vfs.FS, dir string) string {
			putFile(tb, fsys, dir+"/"+recovery.MarkerName, marker)
			return dir
		}},
		{"a damaged marker", func(tb testing.TB, fsys vfs.FS, dir string) string {
			putFile(tb, fsys, dir+"/"+recovery.MarkerName, damaged)
			return dir
		}},
		{"an empty marker", func(tb testing.TB, fsys vfs.FS, dir string) string {
			putFile(tb, fsys, dir+"/"+recovery.MarkerName, nil)
			return dir
		}},
		{"a marker that is a directory", func(tb testing.TB, fsys vfs.FS, dir string) string {
			if err := fsys.MkdirAll(dir+"/"+recovery.MarkerName, 0o755); err != nil {
				tb.Fatal(err)
			}
			return dir
		}},
		{"a store made before the marker", func(tb testing.TB, fsys vfs.FS, dir string) string {
			writeLog(tb, fsys, dir, 1, 1, articleOps())
			return dir
		}},
	}
	systems := []struct {
		name string
		new  func(tb testing.TB) (vfs.FS, string)
	}{
		{"mem", func(tb testing.TB) (vfs.FS, string) { return newDir(tb) }},
		{"os", func(tb testing.TB) (vfs.FS, string) { return vfs.OS, tb.TempDir() }},
	}
	for _, sys := range systems {
		for _, s := range setups {
			t.Run(sys.name+"/"+s.name, func(t *testing.T) {
				fsys, dir := sys.new(t)
				dir = s.setup(t, fsys, dir)
				got, gotErr := recovery.Identify(fsys, dir)
				want, wantErr := recovery.IdentifyByListing(fsys, dir)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("Identify: %v\nby the listing: %v", gotErr, wantErr)
				}
				if got != want && (gotErr == nil || recovery.IsCorrupt(gotErr)) {
					t.Errorf("Identify = %v, by the listing %v", got, want)
				}
			})
		}
	}
}
