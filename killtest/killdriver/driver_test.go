package killdriver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The kill driver's tests run the real kv binary, built once per test
// process into a temporary directory that TestMain removes.
var kvBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if kvBuild.dir != "" {
		os.RemoveAll(kvBuild.dir)
	}
	os.Exit(code)
}

// kvBinary builds ./cmd/kv of this module, once, and returns its path. It
// skips the test when the go command is not on PATH.
func kvBinary(t testing.TB) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the kill driver's tests build the kv binary and need the go command on PATH")
	}
	kvBuild.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			kvBuild.err = err
			return
		}
		kvBuild.dir, kvBuild.err = os.MkdirTemp("", "kv-killtest-bin-")
		if kvBuild.err != nil {
			return
		}
		kvBuild.path = filepath.Join(kvBuild.dir, "kv")
		cmd := exec.Command(goCmd, "build", "-o", kvBuild.path, "./cmd/kv")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			kvBuild.err = errors.New("go build ./cmd/kv: " + err.Error() + "\n" + string(out))
		}
	})
	if kvBuild.err != nil {
		t.Fatal(kvBuild.err)
	}
	return kvBuild.path
}

// moduleRoot is the directory of go.mod above the working directory
// (killdriver/.. when the tests run).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

func reportText(r *Result) string {
	var b bytes.Buffer
	r.WriteReport(&b)
	return b.String()
}

// TestRecovery kills recoveries of the article's directory with the
// correct store: every second recovery gives the map of a recovery
// without a crash, and the report says how many kills landed.
func TestRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 60 recoveries of the real binary")
	}
	bin := kvBinary(t)
	var notes []string
	r, err := Recovery(context.Background(), RecoveryOptions{
		Binary: bin, Runs: 60, Dir: t.TempDir(), Note: func(s string) { notes = append(notes, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	out := reportText(r)
	t.Logf("%s\n%s", strings.Join(notes, "\n"), out)
	if r.Runs != 60 || r.Bad() != 0 || !r.OK(false) {
		t.Errorf("%d runs, %d bad; want 60 runs and none bad", r.Runs, r.Bad())
	}
	if r.Killed == 0 {
		t.Errorf("no run was killed before the recovery finished")
	}
	table := regexp.MustCompile(`^60 runs, SIGKILL after a random delay between [0-9.]+ and [0-9.]+ ms\n` +
		`killed finished outcome\n` +
		` *[0-9]+ +[0-9]+ same map as a recovery without crash\n` +
		`[0-9]+ of 60 kills landed while the recovery was still working \([0-9]+%\); [0-9]+ of them after it had changed the directory\n`)
	if !table.MatchString(out) {
		t.Errorf("the report does not start with the article's table and the killed share:\n%s", out)
	}
	if len(notes) == 0 || !strings.HasPrefix(notes[0], "seed ") {
		t.Errorf("the first note is not the seed: %q", notes)
	}
	if r.Dir != "" {
		t.Errorf("the work directory %s was kept although every run went well", r.Dir)
	}
}

// TestRecoveryDoubleApply is the article's result: with the
// double-apply variant, a recovery killed between the snapshot's rename
// and the deletion of the segment it covers leaves a directory whose next
// recovery applies every increment twice. The window is a directory fsync
// long; should the article's 17 operations not hit it, a workload with a
// hundred more segments to delete makes it longer.
func TestRecoveryDoubleApply(t *testing.T) {
	if testing.Short() {
		t.Skip("runs up to 400 recoveries of the real binary")
	}
	bin := kvBinary(t)
	var r *Result
	for _, ops := range []int{17, 201} {
		var err error
		r, err = Recovery(context.Background(), RecoveryOptions{
			Binary: bin, Runs: 200, Ops: ops, Bug: "double-apply", StopAfterBad: 1, Dir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("--ops %d:\n%s", ops, reportText(r))
		if r.Bad() > 0 {
			break
		}
	}
	if !r.OK(true) {
		t.Fatalf("no bad outcome in %d runs of the double-apply variant", r.Runs)
	}
	var found bool
	for _, o := range r.Outcomes {
		if o.Bad && strings.Contains(o.Desc, "c=110 instead of 55") && strings.Contains(o.Desc, "d=14 instead of 7") {
			found = true
		}
	}
	if !found {
		t.Errorf("no outcome says c=110 instead of 55, d=14 instead of 7:\n%s", reportText(r))
	}
	if len(r.Failures) == 0 || r.Dir == "" {
		t.Fatalf("the failing run was not kept")
	}
	f := r.Failures[0]
	for _, sub := range []string{"before-kill", "after-kill", "after-recovery"} {
		if _, err := os.Stat(filepath.Join(f.Dir, sub)); err != nil {
			t.Errorf("failing run %d: %v", f.Run, err)
		}
	}
	// (go-cmp varies its spacing on purpose: look for the values only.)
	if !strings.HasPrefix(f.Detail, "diff (-want +got):") || !strings.Contains(f.Detail, `"110"`) || !strings.Contains(f.Detail, `"55"`) {
		t.Errorf("the failure's diff does not show c: 55 -> 110:\n%s", f.Detail)
	}
}

// TestWrites kills writers, and the first recovery after each, with
// the correct store: every recovered map holds every acknowledged
// operation, once, in order.
func TestWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 20 writers of the real binary")
	}
	bin := kvBinary(t)
	r, err := Writes(context.Background(), WritesOptions{
		Binary: bin, Runs: 20, Ops: 300, Chain: 1, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := reportText(r)
	t.Log("\n" + out)
	if r.Runs != 20 || r.Bad() != 0 {
		t.Errorf("%d runs, %d bad; want 20 runs and none bad", r.Runs, r.Bad())
	}
	if r.Killed == 0 || r.ChainRuns != 20 {
		t.Errorf("%d writers killed, %d recoveries in the chains; want some, and 20", r.Killed, r.ChainRuns)
	}
	if !strings.Contains(out, "killed finished outcome\n") || !strings.Contains(out, "kills landed while the writer was still working") {
		t.Errorf("report:\n%s", out)
	}
}

func TestDirTreeNames(t *testing.T) {
	tree := dirTree{}
	for _, n := range []string{"log.000001", "log.000002", "log.000003", "log.000005", "snapshot", "snapshot.tmp"} {
		tree[n] = [32]byte{}
	}
	if got, want := tree.names(), "log.000001-log.000003 log.000005 snapshot snapshot.tmp"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestCheckWrites classifies recovered maps against the model.
func TestCheckWrites(t *testing.T) {
	ops := []string{"add c 1", "add c 2", "put k v", "add c 4", "del k"}
	hist, err := replay(ops)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		got              map[string]string
		lastAck, written int
		bad              string
	}{
		{"every ack", map[string]string{"c": "3", "k": "v"}, 3, 5, ""},
		{"one past the last ack", map[string]string{"c": "7", "k": "v"}, 3, 5, ""},
		{"all", map[string]string{"c": "7"}, 5, 5, ""},
		{"lost ack", map[string]string{"c": "3"}, 3, 5, "acknowledged operations lost"},
		{"applied twice", map[string]string{"c": "6", "k": "v"}, 3, 5, "map of no prefix of the operations"},
		{"beyond what was written", map[string]string{"c": "7"}, 3, 4, "map of no prefix of the operations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var bad string
			checkWrites(ops, hist, tc.got, tc.lastAck, tc.written, &Result{}, func(d, _ string) { bad = d })
			if bad != tc.bad {
				t.Errorf("got %q, want %q", bad, tc.bad)
			}
		})
	}
}
