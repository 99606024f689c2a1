package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// kvRun runs the command line in-process and returns its exit code and
// output.
func kvRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRewriteArgs(t *testing.T) {
	root := newRoot(nil, nil, nil)
	tests := []struct{ in, want string }{
		{"data dump", "dump data"},
		{"dump data", "dump data"},
		{". dump --json", "dump . --json"},
		{"--sync never data put k v", "--sync never put data k v"},
		{"--segment-size 4096 data load --ack", "--segment-size 4096 load data --ack"},
		{"--segment-size=4096 data load", "--segment-size=4096 load data"},
		{"dump dump", "dump dump"}, // a directory named like a command
		{"demo", "demo"},
		{"data help", "help data"},
		{"data", "data"},
		{"", ""},
		// Negative numbers are arguments, not flags.
		{"data add c -5", "add -- data c -5"},
		{"data add c -5 --json", "add --json -- data c -5"},
		{"--sync never data add c -5", "add --sync never -- data c -5"},
		{"data add c -- -5", "add data c -- -5"},
		{"data put k -1", "put -- data k -1"},
		{"data put k - --segment-size 4k", "put data k - --segment-size 4k"},
		{"data lock job -- sh -c -1", "lock data job -- sh -c -1"},
		// Completion: the words are rewritten as the command line they
		// complete, the word being completed (last, maybe empty) kept.
		{"__complete data put ''", "__complete put data ''"},
		{"__complete data ''", "__complete ''"},
		{"__complete data g", "__complete g"},
		{"__completeNoDesc data get k", "__completeNoDesc get data k"},
		{"__complete put data ''", "__complete put data ''"},
		{"__complete --sync never data ''", "__complete --sync never ''"},
		{"__complete ''", "__complete ''"},
		{"__complete data add c -5", "__complete add data c -5"},
	}
	for _, tc := range tests {
		in := strings.Fields(tc.in)
		for i := range in {
			if in[i] == "''" {
				in[i] = ""
			}
		}
		got := strings.Join(rewriteArgs(root, in), " ")
		want := strings.ReplaceAll(tc.want, "''", "")
		if got != want {
			t.Errorf("rewriteArgs(%q) = %q, want %q", tc.in, got, want)
		}
	}
}

func TestLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, _, stderr := kvRun(t, "", dir, "put", "k", "v", "--wait", "0")
	want := fmt.Sprintf("kv: %s is locked by process %d (--wait DURATION waits for it)\n", dir, os.Getpid())
	if code != exitTempFail || stderr != want {
		t.Errorf("put on a locked directory: exit %d, stderr %q; want %d, %q", code, stderr, exitTempFail, want)
	}
	code, _, stderr = kvRun(t, "", dir, "put", "k", "v", "--wait", "50ms")
	want = fmt.Sprintf("kv: gave up after --wait 50ms: %s is locked by process %d\n", dir, os.Getpid())
	if code != exitTempFail || stderr != want {
		t.Errorf("put --wait 50ms on a locked directory: exit %d, stderr %q; want %d, %q", code, stderr, exitTempFail, want)
	}
	// Read-only commands still work next to a writer, and see what it
	// has marked durable (Sync marks at once; an idle store, soon).
	s.Put([]byte("k"), []byte("v"))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := kvRun(t, "", dir, "dump", "--read-only")
	if code != 0 || stdout != "k=v\n" {
		t.Errorf("dump --read-only next to a writer: exit %d, %q, %q", code, stdout, stderr)
	}
}

// TestCorruptDirectory flips a byte in the middle of the log: dump fails
// with one line naming the file and offset and changes nothing, check
// lists it, repair refuses without --yes and fixes it with.
func TestCorruptDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ops := ""
	for i := 1; i <= 10; i++ {
		ops += fmt.Sprintf("add c %d\n", i)
	}
	// One load per op, so that every record is synced on its own and the
	// records after a damaged one prove it was synced. Open checkpoints, so
	// use a segment that survives: write all in one load with small groups.
	if code, _, stderr := kvRun(t, ops, dir, "load", "--ack"); code != 0 {
		t.Fatal(stderr)
	}
	seg := filepath.Join(dir, "log.000001")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Damage the second data record's payload.
	var offs []int64
	rd := &wal.Reader{FS: vfs.OS, Dir: dir}
	if _, err := rd.Scan(1, true, func(r wal.Record) error { offs = append(offs, r.Offset); return nil }); err != nil || len(offs) != 10 {
		t.Fatalf("scan: %d records, %v", len(offs), err)
	}
	b[offs[1]+30] ^= 0xff
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(seg)

	// log --json stays JSON: every line an object, the damage one too,
	// at the damaged record, not torn.
	code, stdout, stderr := kvRun(t, "", dir, "log", "--json")
	if code != 0 {
		t.Fatalf("log --json: exit %d, %s", code, stderr)
	}
	var damage []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Errorf("log --json printed a line that is not JSON: %q", line)
		}
		if _, ok := obj["damage"]; ok {
			damage = append(damage, obj)
		}
	}
	if len(damage) != 1 || damage[0]["offset"] != float64(offs[1]) || damage[0]["torn"] != false {
		t.Errorf("log --json on a corrupt log: damage %v, want one, at offset %d, not torn", damage, offs[1])
	}

	code, stdout, stderr = kvRun(t, "", dir, "dump")
	re := regexp.MustCompile(fmt.Sprintf(`^kv: .*log\.000001 offset %d: corrupt log: .*nothing was changed.*\n$`, offs[1]))
	if code != 1 || stdout != "" || !re.MatchString(stderr) {
		t.Errorf("dump of a corrupt dir: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	after, _ := os.ReadFile(seg)
	if !bytes.Equal(before, after) {
		t.Error("a refused recovery changed the segment")
	}
	code, stdout, _ = kvRun(t, "", dir, "check")
	if code != 1 || !strings.Contains(stdout, fmt.Sprintf("corrupt: %s offset %d:", seg, offs[1])) {
		t.Errorf("check: exit %d, %q", code, stdout)
	}
	code, stdout, stderr = kvRun(t, "", dir, "repair")
	if code != 1 || !strings.Contains(stdout, "keeps every record through revision 1") || !strings.Contains(stderr, "--yes") {
		t.Errorf("repair without --yes: exit %d, %q, %q", code, stdout, stderr)
	}
	code, stdout, stderr = kvRun(t, "", dir, "repair", "--yes")
	if code != 0 {
		t.Fatalf("repair --yes: exit %d, %q, %q", code, stdout, stderr)
	}
	if _, err := os.Stat(seg + ".broken"); err != nil {
		t.Errorf("no evidence kept: %v", err)
	}
	code, stdout, stderr = kvRun(t, "", dir, "dump")
	if code != 0 || stdout != "c=1\n" {
		t.Errorf("dump after repair: exit %d, %q, %q", code, stdout, stderr)
	}
}

// TestNonRegularSegment plants a symbolic link and a FIFO under a
// segment's name: dump must fail at once with one line naming the file
// and what it is, exit 1, and leave the link's target as it was.
func TestNonRegularSegment(t *testing.T) {
	tests := []struct {
		name  string
		kind  string
		plant func(t *testing.T, name string)
	}{
		{name: "symlink", kind: "symbolic link", plant: func(t *testing.T, name string) {
			target := filepath.Join(t.TempDir(), "notes.txt")
			if err := os.WriteFile(target, []byte("precious: not a segment\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, name); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "FIFO", kind: "FIFO", plant: func(t *testing.T, name string) {
			if err := syscall.Mkfifo(name, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			seg := filepath.Join(dir, "log.000001")
			tc.plant(t, seg)
			var target string
			if dst, err := os.Readlink(seg); err == nil {
				target = dst
			}
			var before []byte
			if target != "" {
				before, _ = os.ReadFile(target)
			}
			for _, args := range [][]string{{dir, "dump"}, {"dump", dir}, {dir, "dump", "--read-only"}} {
				type result struct {
					code           int
					stdout, stderr string
				}
				done := make(chan result, 1)
				go func() {
					code, stdout, stderr := kvRun(t, "", args...)
					done <- result{code, stdout, stderr}
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(5 * time.Second):
					if w, err := os.OpenFile(seg, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
					t.Fatalf("kv %s blocked on the %s", strings.Join(args, " "), tc.kind)
				}
				want := fmt.Sprintf("kv: open %s: vfs: not a regular file (%s)\n", seg, tc.kind)
				if r.code != 1 || r.stdout != "" || r.stderr != want {
					t.Errorf("kv %s: exit %d, stdout %q, stderr %q; want exit 1, stderr %q",
						strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
				}
			}
			if target != "" {
				if after, _ := os.ReadFile(target); !bytes.Equal(before, after) {
					t.Errorf("the link's target changed: %q, was %q", after, before)
				}
			}
		})
	}
}

func TestDemo(t *testing.T) {
	code, stdout, stderr := kvRun(t, "", "demo")
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"files: log.000001   (closing does not checkpoint)",
		"replayed 17 records",
		"files now: log.000002 snapshot",
		"map: c=55 d=7 k1=v1 k2=v2 k4=v4 k5=v5",
		"killed; files left: log.000001 log.000002 snapshot",
		"same map as a recovery without a crash",
		"recovered again: c=110 d=14 k1=v1 k2=v2 k4=v4 k5=v5",
		// Where the workload and the bug come from, and what to do next.
		`The workload and the bug come from the article "Recovery Code Must Survive a Crash Too"`,
		"== what to try next",
		"kv crashsim recovery --bug double-apply",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestCrashsim(t *testing.T) {
	code, stdout, stderr := kvRun(t, "", "crashsim", "recovery", "--no-nested")
	if code != 0 || !strings.Contains(stdout, "process crash: 22 states, 0 bad") {
		t.Errorf("crashsim recovery: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = kvRun(t, "", "crashsim", "recovery", "--bug", "double-apply", "--model", "process", "--no-nested")
	want := "first bad process state: crash after event 12 of 21 (rename snapshot.tmp -> snapshot): recovery: c=110 instead of 55, d=14 instead of 7"
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("crashsim --bug double-apply: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := kvRun(t, "", "crashsim", "nope"); code != 2 {
		t.Errorf("unknown workload: exit %d %s", code, stderr)
	}
}

// TestReadAfterCrashedWriter: a writer acknowledged its last put and died
// before marking the log (the mark is cut off here). A read-only open sees
// no writer alive and vouches for the put itself (an fdatasync, which
// changes no byte), so the library's read-only open and every read
// command show it, and no file of the directory changes.
func TestReadAfterCrashedWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := kv.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("k1"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "log.000001")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	recs := recordStarts(b)
	last := recs[len(recs)-1]
	if b[last] != 4 {
		t.Fatalf("the log does not end with a mark: type %d at %d", b[last], last)
	}
	if err := os.WriteFile(seg, b[:last], 0o600); err != nil {
		t.Fatal(err)
	}
	before := hashDir(t, dir)
	r, err := kv.Open(dir, &kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := r.Get([]byte("k1")); err != nil || string(e.Value) != "v1" || r.Stats().RecoveryVouched != 1 {
		t.Errorf("a read-only open after the writer died: %v, %v (vouched %d)", e, err, r.Stats().RecoveryVouched)
	}
	r.Close()
	for _, args := range [][]string{{"get", "k1"}, {"dump", "--read-only"}, {"scan"}} {
		code, stdout, stderr := kvRun(t, "", append([]string{dir}, args...)...)
		if code != 0 || !strings.Contains(stdout, "v1") || stderr != "" {
			t.Errorf("%v after a crashed writer: exit %d, %q, %q", args, code, stdout, stderr)
		}
	}
	if after := hashDir(t, dir); !maps.Equal(before, after) {
		t.Errorf("reading changed the directory: before %v, after %v", before, after)
	}
}

// TestExitCodes: a mistake in the command line exits with exitUsage,
// whether kv or cobra finds it, and a failed command with exitFailed (or
// its own code); each says so in one message with one "kv: " in front.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "store")
	if code, _, stderr := kvRun(t, "", store, "put", "--create", "k", "v"); code != 0 {
		t.Fatal(stderr)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown command", []string{"nosuchcommand"}, exitUsage, `unknown command "nosuchcommand" for "kv"`},
		{"unknown command, as a suggestion", []string{"dupm"}, exitUsage, "Did you mean this?"},
		{"directory without a command", []string{dir}, exitUsage, "unknown command"},
		{"unknown flag", []string{"dump", dir, "--no-such-flag"}, exitUsage, "unknown flag: --no-such-flag"},
		{"unknown shorthand", []string{"dump", dir, "-z"}, exitUsage, "unknown shorthand flag"},
		{"too few arguments", []string{dir, "put", "k"}, exitUsage, "put: wrong number of arguments"},
		{"too many arguments", []string{"killtest", "recovery", "extra"}, exitUsage, "wrong number of arguments"},
		{"cobra's argument check", []string{"completion", "bash", "extra"}, exitUsage, `unknown command "extra"`},
		{"bad flag value", []string{"--sync", "sometimes", dir, "put", "k", "v"}, exitUsage, "--sync"},
		{"missing key", []string{store, "get", "nokey"}, exitNoKey, `kv: key "nokey" not found`},
		{"missing empty key", []string{store, "get", `""`}, exitNoKey, `kv: key "" not found`},
		{"not a store", []string{dir, "get", "k"}, exitFailed, "no kv store in " + dir},
		{"size with nonsense", []string{store, "put", "k", "v", "--segment-size", "1"}, exitUsage, "below the least of 1KiB"},
		{"store flag on a command without a store", []string{"demo", "--segment-size", "64MiB"}, exitUsage, "unknown flag: --segment-size"},
		{"no such directory", []string{filepath.Join(dir, "none"), "dump"}, exitFailed, "no such data directory"},
		{"not an integer", []string{store, "add", "k", "1"}, exitFailed, `kv: value is not a decimal integer: key "k" holds "v"`},
		{"a stale fence", []string{store, "put", "k", "v", "--fence", "job:3"}, exitFenced, "kv: fenced: job:3 is not the current holder's token"},
		{"a fence on a bad lock name", []string{store, "put", "k", "v", "--fence", ".job:3"}, exitUsage, `kv: filelock: invalid argument: lock name ".job": 1 to 128 of [A-Za-z0-9._-], not starting with '.'`},
		{"a bad lock strategy", []string{store, "lock", "job", "--strategy", "bogus", "--", "true"}, exitUsage, `strategy "bogus" is not one of`},
		{"a bad quoted key", []string{store, "get", `"k`}, exitUsage, `kv: key "\"k" starts with a double quote but is not a Go-quoted string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := kvRun(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("kv %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.stderr)
			}
			if strings.Count(stderr, "kv: ") != 1 || !strings.HasPrefix(stderr, "kv: ") {
				t.Errorf("kv %s: stderr %q: want one message, with one \"kv: \" in front", strings.Join(tc.args, " "), stderr)
			}
			if tc.code == exitUsage && !strings.HasSuffix(stderr, "Run 'kv --help' for usage.\n") {
				t.Errorf("kv %s: no hint in %q", strings.Join(tc.args, " "), stderr)
			}
		})
	}
}
