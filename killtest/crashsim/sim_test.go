package crashsim

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/kvstore/kv/internal/variant"
)

var long = flag.Bool("long", false, "run the larger simulator workloads")

func report(t *testing.T, rep *Report) string {
	t.Helper()
	var b strings.Builder
	rep.Print(&b)
	return b.String()
}

// TestSimCorrectStore: every workload under every model, nested recovery
// included, has no bad state.
func TestSimCorrectStore(t *testing.T) {
	n := 100
	if *long {
		n = 400
	}
	ws, err := Workloads(n, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		t.Run(w.Name, func(t *testing.T) {
			rep, err := Check(w, Config{Models: Models(), Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			out := report(t, rep)
			t.Logf("%s: %v, %d recoveries\n%s", w.Name, rep.Duration, rep.Recoveries, out)
			if !rep.Ok() {
				t.Errorf("bad states for the correct store:\n%s", out)
			}
			if rep.Models[0].States < 10 || rep.Nested.States < 10 {
				t.Errorf("too few states checked: %+v", rep.Models[0])
			}
		})
	}
}

// bugCases says, for each bug variant, a workload and the model whose
// states catch it, and what the first bad state must say.
var bugCases = []struct {
	bug      variant.Bug
	workload string
	model    Model
	nested   bool   // caught only by crashing the recovery of a crash state
	event    string // the first bad state comes after this event
	reason   string // and says this
}{
	{variant.DoubleApply, "recovery", Process, false, "rename snapshot.tmp -> snapshot", "c=110 instead of 55, d=14 instead of 7"},
	{variant.NoSync, "writes", Machine, false, "ack 1", "acknowledged operation lost"},
	{variant.AckBeforeSync, "writes", Machine, false, "ack", "acknowledged operation lost"},
	{variant.NoDirSync, "writes", Machine, false, "ack 1", "acknowledged operation lost"},
	{variant.RenameBeforeFsync, "recovery", Machine, false, "rename snapshot.tmp -> snapshot", "corrupt snapshot"},
	{variant.UnlinkEarly, "recovery", Process, false, "unlink log.000001", "snapshot missing"},
	{variant.TrustTmp, "recovery", Process, false, "create snapshot.tmp", "corrupt snapshot"},
	// The torn segment followed by an empty one is a rotation cut short,
	// which recovery accepts, and a checkpoint covers it without rotating
	// again: the variant shows once a write goes into the next segment.
	{variant.TornAsCorrupt, "torn-writes", Process, false, "write 45 bytes to log.000002", "corrupt log: /data/log.000001 at offset"},
	{variant.TornAsCorrupt, "torn-writes", Machine, false, "write 45 bytes to log.000002", "corrupt log: /data/log.000001 at offset"},
	{variant.LeaseGrace, "leases", Process, false, "write", `instead of "ttl 4s deadline t0+5`},
	{variant.LeaseGrace, "leases", Machine, false, "write", `instead of "ttl 4s deadline t0+5`},
	{variant.BackupLive, "backup", Process, false, "rename backup.", "is not the map at its revision"},
}

// TestSimBugsCaught: each bug variant gives bad states in the model where
// it should, and the first one is the expected crash point.
func TestSimBugsCaught(t *testing.T) {
	ws, err := Workloads(60, 1)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Workload{}
	for _, w := range ws {
		byName[w.Name] = w
	}
	for _, bc := range bugCases {
		t.Run(string(bc.bug)+"/"+bc.workload, func(t *testing.T) {
			cfg := Config{Models: []Model{bc.model}, Bug: bc.bug, Seed: 1, NoNested: !bc.nested}
			rep, err := Check(byName[bc.workload], cfg)
			if err != nil {
				t.Fatal(err)
			}
			out := report(t, rep)
			t.Logf("\n%s", out)
			mr := rep.Models[0]
			if bc.nested {
				mr = rep.Nested
			}
			if mr.Bad == 0 || mr.First == nil {
				t.Fatalf("bug %s not caught by %s states:\n%s", bc.bug, bc.model, out)
			}
			if !strings.HasPrefix(mr.First.Event, bc.event) || !strings.Contains(mr.First.Reason, bc.reason) {
				t.Errorf("first bad state: %s\nwant the crash after %q and %q", mr.First, bc.event, bc.reason)
			}
		})
	}
}

// TestEveryVariantChecked: every bug variant has a test that shows a
// checker catching it, and a row in docs/crash-testing.md's table of variants; a
// variant added without either fails here.
func TestEveryVariantChecked(t *testing.T) {
	checked := map[variant.Bug]bool{}
	for _, bc := range bugCases {
		checked[bc.bug] = true
	}
	for _, b := range fsyncFailureBugs {
		checked[b] = true
	}
	readme, err := os.ReadFile("../../docs/crash-testing.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[variant.Bug]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok := strings.Cut(rest, "`"); ok {
				rows[variant.Bug(name)] = true
			}
		}
	}
	for _, b := range variant.All() {
		if !checked[b] {
			t.Errorf("bug variant %s: no checker test catches it (add it to bugCases)", b)
		}
		if !rows[b] {
			t.Errorf("bug variant %s: no row in docs/crash-testing.md's table of variants", b)
		}
		delete(checked, b)
	}
	for b := range checked {
		t.Errorf("bugCases names %q, which variant.All does not list", b)
	}
}

// TestSimRandomShrinks: a generated workload that fails (here on the
// no-sync variant) shrinks to the fewest operations that still fail.
func TestSimRandomShrinks(t *testing.T) {
	cfg := Config{Models: []Model{Machine}, Bug: variant.NoSync, NoNested: true, Seed: 1}
	n, rep, err := Shrink(40, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep == nil || rep.Ok() {
		t.Fatal("the shrunk workload does not fail")
	}
	if n != 1 {
		t.Errorf("shrunk to %d operations, want 1 (one unsynced acknowledged write is enough)", n)
	}
	// And the correct store passes the same generated workloads.
	for seed := uint64(1); seed <= 4; seed++ {
		rep, err := Check(RandomWorkload(60, seed), Config{Models: []Model{Process, Machine}, Seed: seed, NoNested: seed > 2})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Ok() {
			t.Errorf("seed %d:\n%s", seed, report(t, rep))
		}
	}
}
