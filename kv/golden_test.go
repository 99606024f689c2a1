package kv_test

import (
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

var update = flag.Bool("update", false, "rewrite the golden traces in testdata/golden")

// goldenDir is the data directory of the traced stores, on an in-memory
// file system: the traces name files by their base names only.
const goldenDir = "/data"

// goldenScenarios are the store's golden traces: the file-system calls of
// each, in order, with the acknowledgements interleaved, as the crash
// simulator's recorder sees them. They are the same on every run: the
// directory is on an in-memory file system, the salts are the recorder's
// fixed ones (wal.Salter), the LOCK file (which holds a pid) is not
// recorded, and gateFS fixes where an ack falls against the syncs and
// marks around it.
var goldenScenarios = []struct {
	name  string // testdata/golden/NAME.trace
	about string // the trace's header line
	opts  kv.Options
	run   func(*traceRun)
}{
	{
		name:  "open-empty",
		about: "Open of an empty directory: the first segment, then the marker; then Close.",
		run: func(r *traceRun) {
			r.open()
			r.close()
		},
	},
	{
		name:  "three-puts",
		about: "Three puts under Always: each is written, synced, acknowledged, then marked when the store goes idle.",
		run: func(r *traceRun) {
			r.open()
			r.put("a", "1")
			r.put("b", "2")
			r.put("c", "3")
			r.close()
		},
	},
	{
		name:  "rotation",
		about: "The second put finds the segment past SegmentSize (64 bytes): next segment, its header synced, directory sync, then the seal of the first, synced, then the put.",
		opts:  kv.Options{SegmentSize: 64},
		run: func(r *traceRun) {
			r.open()
			r.put("a", "1")
			r.put("b", "2")
			r.close()
		},
	},
	{
		name:  "checkpoint",
		about: "Checkpoint after two puts: rotate, publish the snapshot durably, then delete the segment it covers; Close marks the new segment, which holds its header alone, so that the reopen after it writes and syncs nothing.",
		run: func(r *traceRun) {
			r.open()
			r.put("a", "1")
			r.put("b", "2")
			r.checkpoint()
			r.close()
			r.open()
			r.close()
		},
	},
}

// TestGoldenTraces compares the trace of each scenario with its golden
// file in testdata/golden; -update rewrites the files. A change in the
// order of syncs, renames, unlinks and acknowledgements shows in the diff.
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
				t.Errorf("the trace differs from %s; if the change is intended, run go test ./kv -run Golden -update (-want +got):\n%s", file, diff)
			}
		})
	}
}

// TestGoldenTracesCatchBugs runs scenarios on bug variants and asserts
// that each trace differs from its golden file: the golden files are a
// checker too. The diff is logged: under ack-before-sync the ack of each
// put moves before its fdatasync.
func TestGoldenTracesCatchBugs(t *testing.T) {
	if !variant.Enabled {
		t.Skip("this build carries no bug variants (kvrelease)")
	}
	for _, c := range []struct {
		scenario string
		bug      variant.Bug
	}{
		{"three-puts", variant.AckBeforeSync}, // the ack moves before the fdatasync
		{"three-puts", variant.NoSync},        // the fdatasync after each put is gone
		{"rotation", variant.NoDirSync},       // no directory sync after log.000002 is created
		{"checkpoint", variant.NoDirSync},     // ... nor after the snapshot's rename
		{"checkpoint", variant.RenameBeforeFsync},
		{"checkpoint", variant.UnlinkEarly},
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
		tb.Fatalf("%v (run go test ./kv -run Golden -update to create it)", err)
	}
	return string(b)
}

// traceScenario runs the named scenario on a store carrying bug and
// returns its trace as the golden file holds it.
func traceScenario(tb testing.TB, name string, bug variant.Bug) string {
	tb.Helper()
	for _, sc := range goldenScenarios {
		if sc.name != name {
			continue
		}
		mem := vfs.NewMem()
		if err := mem.MkdirAll(goldenDir, 0o755); err != nil {
			tb.Fatal(err)
		}
		rec := vfs.NewRecorder(mem, nil)
		g := &gateFS{FS: rec, marked: make(chan struct{}, 1)}
		r := &traceRun{tb: tb, rec: rec, gate: g, opts: sc.opts}
		r.opts.FS = variant.Wrap(g, bug) // above the recorder: it records what the disk sees
		tb.Cleanup(func() {
			if r.st != nil { // the scenario failed part way
				g.release()
				r.st.Close()
			}
		})
		sc.run(r)
		return "# " + sc.about + "\n" + renderTrace(rec.Events(), r.phases)
	}
	tb.Fatalf("no golden scenario %q", name)
	return ""
}

// traceRun drives a store on a recording file system and names the
// phases of its trace.
type traceRun struct {
	tb     testing.TB
	rec    *vfs.Recorder
	gate   *gateFS
	opts   kv.Options
	st     *kv.Store
	ops    int     // operations issued
	phases []phase // in order
}

// phase names the events from at on.
type phase struct {
	at   int
	name string
}

func (r *traceRun) phase(name string) {
	r.phases = append(r.phases, phase{at: len(r.rec.Events()), name: name})
}

func (r *traceRun) open() {
	r.tb.Helper()
	r.phase("open")
	st, err := kv.Open(goldenDir, &r.opts)
	if err != nil {
		r.tb.Fatal(err)
	}
	r.st = st
}

// put puts key, recording its issue and its acknowledgement, and waits
// for the mark the store writes once it is idle, so that the mark lands
// in this put's phase on every run.
func (r *traceRun) put(key, value string) {
	r.tb.Helper()
	r.ops++
	r.phase("put " + key)
	select { // a signal left over, if any, is not this put's mark
	case <-r.gate.marked:
	default:
	}
	r.rec.Issue(r.ops)
	r.gate.expect(func() bool {
		_, err := r.st.Get([]byte(key))
		return err == nil
	})
	if _, err := r.st.Put([]byte(key), []byte(value)); err != nil {
		r.tb.Fatal(err)
	}
	r.rec.Ack(r.ops)
	r.gate.release()
	select {
	case <-r.gate.marked:
	case <-time.After(time.Minute):
		r.tb.Fatalf("put %s: the store wrote no mark after going idle", key)
	}
}

func (r *traceRun) checkpoint() {
	r.tb.Helper()
	r.phase("checkpoint")
	if err := r.st.Checkpoint(); err != nil {
		r.tb.Fatal(err)
	}
}

func (r *traceRun) close() {
	r.tb.Helper()
	r.phase("close")
	st := r.st
	r.st = nil
	if err := st.Close(); err != nil {
		r.tb.Fatal(err)
	}
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
	if e.Op == "write" && isLog(e.Path) && len(e.Data) > 0 {
		if e.Data[0] == 0 {
			return s + " (zeros)"
		}
		return s + " (" + wal.RecordType(e.Data[0]).String() + ")"
	}
	return s
}

func isLog(name string) bool { return strings.HasPrefix(path.Base(name), "log.") }

// gateFS sits between the store and the recorder and makes a put's trace
// the same on every run, whatever the scheduler does. Two events race the
// test's record of an acknowledgement, which it can only make once Put
// returns: the mark the store writes a millisecond after it went idle,
// and, in a store that acknowledges early, the sync that follows the
// acknowledgement. The gate holds both until the test has recorded the
// ack: the mark always (it comes after the ack), and a log sync when the
// put is visible already, which the store makes it only together with
// its acknowledgement. A correct store's syncs under Always pass at once.
type gateFS struct {
	vfs.FS // the recorder

	mu     sync.Mutex
	put    *gatedPut     // the put in flight, if any
	marked chan struct{} // a mark was written
}

type gatedPut struct {
	visible func() bool
	acked   chan struct{}
}

// expect gates the put about to be issued; visible tells whether the
// store shows it.
func (g *gateFS) expect(visible func() bool) {
	g.mu.Lock()
	g.put = &gatedPut{visible: visible, acked: make(chan struct{})}
	g.mu.Unlock()
}

// release opens the gate: the put's ack is recorded.
func (g *gateFS) release() {
	g.mu.Lock()
	p := g.put
	g.put = nil
	g.mu.Unlock()
	if p != nil {
		close(p.acked)
	}
}

func (g *gateFS) inFlight() *gatedPut {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.put
}

// NewSalt passes the recorder's fixed salts on (wal.Salter).
func (g *gateFS) NewSalt() uint64 { return g.FS.(wal.Salter).NewSalt() }

func (g *gateFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) Create(n string) (vfs.File, error)        { return g.wrap(g.FS.Create(n)) }
func (g *gateFS) Open(n string) (vfs.File, error)          { return g.wrap(g.FS.Open(n)) }
func (g *gateFS) OpenReadWrite(n string) (vfs.File, error) { return g.wrap(g.FS.OpenReadWrite(n)) }

type gateFile struct {
	vfs.File
	g *gateFS
}

func (f *gateFile) WriteAt(p []byte, off int64) (int, error) {
	mark := isLog(f.Name()) && len(p) > 0 && p[0] == byte(wal.TypeMark)
	if put := f.g.inFlight(); mark && put != nil {
		<-put.acked
	}
	n, err := f.File.WriteAt(p, off)
	if mark {
		select {
		case f.g.marked <- struct{}{}:
		default:
		}
	}
	return n, err
}

func (f *gateFile) Sync() error {
	if put := f.g.inFlight(); put != nil && isLog(f.Name()) && put.visible() {
		<-put.acked
	}
	return f.File.Sync()
}
