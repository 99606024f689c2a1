package recovery_test

import (
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

var update = flag.Bool("update", false, "rewrite the golden traces in testdata/golden")

// goldenScenarios are recovery's golden traces: the directory each starts
// from, and the file-system calls of Recover on it, in order, as the
// crash simulator's recorder sees them.
var goldenScenarios = []struct {
	name  string // testdata/golden/NAME.trace
	about string // the trace's header line
	// setup builds the directory in dir before the recording starts.
	setup func(tb testing.TB, fsys *vfs.MemFS, dir string)
}{
	{
		name:  "torn-tail",
		about: "Recovery of a torn tail: log.000001 holds three puts, the third cut 7 bytes in.",
		setup: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
			writeLog(tb, salted(fsys), dir, 1, 1, goldenOps())
			spans := recordSpans(tb, fsys, dir, 1)
			full, err := vfs.ReadFile(fsys, wal.SegmentPath(dir, 1))
			if err != nil {
				tb.Fatal(err)
			}
			rewrite(tb, fsys, wal.SegmentPath(dir, 1), full[:spans[len(spans)-1][0]+7])
		},
	},
	{
		name:  "covered-left-over",
		about: "Recovery with a covered segment left over: the snapshot covers log.000001, which a crash kept from being deleted.",
		setup: func(tb testing.TB, fsys *vfs.MemFS, dir string) {
			writeLog(tb, salted(fsys), dir, 1, 1, goldenOps())
			seg, err := vfs.ReadFile(fsys, wal.SegmentPath(dir, 1))
			if err != nil {
				tb.Fatal(err)
			}
			res, err := recovery.Recover(salted(fsys), dir, recovery.Options{})
			if err != nil {
				tb.Fatal(err)
			}
			if err := res.Writer.Close(); err != nil {
				tb.Fatal(err)
			}
			rewrite(tb, fsys, wal.SegmentPath(dir, 1), seg) // as if the crash came before its unlink
		},
	},
}

// goldenOps are the puts the scenarios' logs hold.
func goldenOps() []record.Op {
	return []record.Op{
		{Kind: record.KindPut, Key: []byte("a"), Value: []byte("1")},
		{Kind: record.KindPut, Key: []byte("b"), Value: []byte("2")},
		{Kind: record.KindPut, Key: []byte("c"), Value: []byte("3")},
	}
}

// salted returns fsys with the recorder's fixed salts (wal.Salter), so
// that the segments a setup writes are the same bytes on every run.
func salted(fsys vfs.FS) vfs.FS { return vfs.NewRecorder(fsys, nil) }

// TestGoldenTraces compares the trace of each scenario with its golden
// file in testdata/golden; -update rewrites the files. A change in the
// order of truncates, syncs, renames and unlinks shows in the diff.
func TestGoldenTraces(t *testing.T) {
	for _, sc := range goldenScenarios {
		t.Run(sc.name, func(t *testing.T) {
			got := traceScenario(t, sc.name, variant.None)
			file := goldenFile(sc.name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readGolden(t, file)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the trace differs from %s; if the change is intended, run go test ./recovery -run Golden -update (-want +got):\n%s", file, diff)
			}
		})
	}
}

// TestGoldenTracesCatchBugs runs scenarios on bug variants and asserts
// that each trace differs from its golden file: the golden files are a
// checker too.
func TestGoldenTracesCatchBugs(t *testing.T) {
	if !variant.Enabled {
		t.Skip("this build carries no bug variants (kvrelease)")
	}
	for _, c := range []struct {
		scenario string
		bug      variant.Bug
	}{
		{"torn-tail", variant.TornAsCorrupt},     // the tail is neither cut nor sealed
		{"torn-tail", variant.NoDirSync},         // no directory sync after log.000002 or the rename
		{"torn-tail", variant.RenameBeforeFsync}, // the snapshot's sync moves past its rename
		{"torn-tail", variant.UnlinkEarly},       // log.000001 goes before the snapshot exists
		{"covered-left-over", variant.NoDirSync}, // the snapshot's name is not made durable first
	} {
		t.Run(c.scenario+"/"+string(c.bug), func(t *testing.T) {
			want := readGolden(t, goldenFile(c.scenario))
			got := traceScenario(t, c.scenario, c.bug)
			diff := cmp.Diff(want, got)
			if diff == "" {
				t.Fatalf("the trace under %s matches %s: the golden trace does not catch the bug", c.bug, goldenFile(c.scenario))
			}
			t.Logf("caught (-want +got):\n%s", diff)
		})
	}
}

func goldenFile(name string) string { return filepath.Join("testdata", "golden", name+".trace") }

func readGolden(tb testing.TB, file string) string {
	tb.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatalf("%v (run go test ./recovery -run Golden -update to create it)", err)
	}
	return string(b)
}

// traceScenario builds the named scenario's directory, recovers it on a
// recording file system carrying bug, and returns the trace as the golden
// file holds it.
func traceScenario(tb testing.TB, name string, bug variant.Bug) string {
	tb.Helper()
	for _, sc := range goldenScenarios {
		if sc.name != name {
			continue
		}
		mem, dir := newDir(tb)
		sc.setup(tb, mem, dir)
		names, err := mem.List(dir)
		if err != nil {
			tb.Fatal(err)
		}
		for i, n := range names {
			names[i] = path.Join(dir, n)
		}
		rec := vfs.NewRecorder(mem, names)
		fsys := variant.Wrap(rec, bug) // above the recorder: it records what the disk sees
		res, err := recovery.Recover(fsys, dir, recovery.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		recovered := len(rec.Events())
		if err := res.Writer.Close(); err != nil {
			tb.Fatal(err)
		}
		return "# " + sc.about + "\n" + renderTrace(rec.Events(), []phase{{0, "recover"}, {recovered, "close"}})
	}
	tb.Fatalf("no golden scenario %q", name)
	return ""
}

// phase names the events from at on.
type phase struct {
	at   int
	name string
}

// renderTrace writes the events phase by phase, one line each, indented
// under the phase's name.
func renderTrace(events []vfs.Event, phases []phase) string {
	var b strings.Builder
	for i, p := range phases {
		end := len(events)
		if i+1 < len(phases) {
			end = phases[i+1].at
		}
		b.WriteString(p.name + "\n")
		for _, e := range events[p.at:end] {
			b.WriteString("  " + describe(e) + "\n")
		}
	}
	return b.String()
}

// describe is Event.String, with the record type a write to a log
// segment starts with (zeros: the preallocated space written over).
func describe(e vfs.Event) string {
	s := e.String()
	if e.Op == "write" && strings.HasPrefix(path.Base(e.Path), "log.") && len(e.Data) > 0 {
		if e.Data[0] == 0 {
			return s + " (zeros)"
		}
		return s + " (" + wal.RecordType(e.Data[0]).String() + ")"
	}
	return s
}
