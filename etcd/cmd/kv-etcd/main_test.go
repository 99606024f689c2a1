package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/etcd/internal/cluster"
)

// memberBin is the etcd member of the tests' clusters; kvBin the main
// module's kv, with kv-etcd built next to it, where kv --etcd finds it.
var memberBin, kvBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kv-etcd")
	if err != nil {
		panic(err)
	}
	memberBin, err = cluster.BuildMember(dir)
	if err == nil {
		err = build(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds kv (in the main module, the repository's root) and
// kv-etcd into dir.
func build(dir string) error {
	kvBin = filepath.Join(dir, "kv")
	c := exec.Command("go", "build", "-o", kvBin, "./cmd/kv")
	c.Dir = "../../.."
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("building kv: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "kv-etcd"), ".").CombinedOutput(); err != nil {
		return fmt.Errorf("building kv-etcd: %v\n%s", err, out)
	}
	return nil
}

// backend is where a step runs: a data directory or a cluster.
type backend struct {
	name   string
	target []string // the arguments that name it: DIR, or --etcd ENDPOINTS
	base   int64    // its revision before the first step
}

// result is what one invocation of kv gave.
type result struct {
	code           int
	stdout, stderr string
}

// runKV runs the kv binary with args, stdin, and env added to the
// environment.
func runKV(t testing.TB, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, kvBin, args...)
	c.Stdin = strings.NewReader(stdin)
	c.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("kv %q: still running after a minute", args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kv %q: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// Revisions in kv's output: "revision N" in text, the revision fields of
// JSON, and the revision that starts a line of watch.
var (
	revText  = regexp.MustCompile(`revision (\d+)`)
	revJSON  = regexp.MustCompile(`"(revision|create_revision|mod_revision)":(\d+)`)
	revWatch = regexp.MustCompile(`(?m)^(\d+) (put|del) `)
	revArg   = regexp.MustCompile(`\{R\+(\d+)\}`)
)

// normalize writes every revision of out relative to the backend's
// revision before the first step: revision base+n becomes "R+n". Both
// backends count one revision per write, so after the same steps the
// same n must come out; only the base differs (a new store is at 0, an
// empty cluster at 1, and this one has had writes before).
func normalize(out string, base int64) string {
	rel := func(s string) string {
		n, _ := strconv.ParseInt(s, 10, 64)
		if n == 0 {
			return "0" // absent: a deleted key's create revision
		}
		return fmt.Sprintf("R+%d", n-base)
	}
	out = revText.ReplaceAllStringFunc(out, func(m string) string {
		return "revision " + rel(revText.FindStringSubmatch(m)[1])
	})
	out = revJSON.ReplaceAllStringFunc(out, func(m string) string {
		s := revJSON.FindStringSubmatch(m)
		return fmt.Sprintf("%q:%q", s[1], rel(s[2]))
	})
	return revWatch.ReplaceAllStringFunc(out, func(m string) string {
		s := revWatch.FindStringSubmatch(m)
		return rel(s[1]) + " " + s[2] + " "
	})
}

// step is one invocation of kv, on both backends. {R+n} in an argument
// is the backend's revision base+n.
type step struct {
	args  []string
	stdin string
	// stderrDiffers: the exit code and stdout must agree, but the
	// message on stderr may say it the backend's way.
	stderrDiffers bool
	// compact: before the step, each backend drops its history up to
	// its current revision: a checkpoint of the directory (which
	// deletes the segments it covers), a compaction of the cluster.
	compact bool
	// stderrHas, when set, is a text each backend's stderr must hold.
	stderrHas string
}

func s(args ...string) step { return step{args: args} }

// steps is the table that TestSameOutput runs on both backends, in
// order.
var steps = []step{
	s("put", "k1", "v1"),
	s("put", "k2", "v2", "--json"),
	s("watch", "--from", "{R+1}", "--count", "2"),
	s("watch", "--from", "{R+1}", "--count", "2", "--json", "--prev"),
	s("get", "k1"),
	s("get", "k1", "--json"),
	s("get", "k2", "--raw"),
	s("get", "nothere"),
	s("get", "nothere", "--json"),
	s("get", "k1", "--raw", "--json"),
	{args: []string{"put", "big", "-"}, stdin: "from stdin\nwith lines\n"},
	s("add", "c", "5"),
	s("add", "c", "-7", "--json"),
	s("add", "c", "x"),
	s("add", "k1", "1"),
	s("put", "max", "9223372036854775807"),
	s("add", "max", "1"),
	s("put", `"a key"`, `"two\nlines"`),
	s("put", "bin", `"\xff\x00"`),
	s("get", `"a key"`, "--json"),
	s("del", "k2"),
	s("del", "k2", "--json"),
	s("del", "nothere"),
	s("put", "k2", "again"),
	s("get", "k2", "--json"),
	s("watch", "--from", "{R+8}", "--count", "3", "--prev"),
	s("scan"),
	s("scan", "k"),
	s("scan", "k", "--keys-only"),
	s("scan", "--count"),
	s("scan", "--count", "--json"),
	s("scan", "--from", "big", "--to", "k2", "--json"),
	s("scan", "--limit", "2"),
	s("scan", "--from", "z", "--to", "a"),
	s("scan", "--limit", "-1"),
	s("dump"),
	s("dump", "--json"),
	{args: []string{"put", "x", "y", "--fence", "nightly:99999"}, stderrDiffers: true},
	s("put", "x", "y", "--fence", "nightly"),
	s("locks"),
	s("lock", "nightly", "--", "sh", "-c", `$KV $TARGET put state done --fence nightly:$KV_FENCE_TOKEN`),
	s("lock", "nightly", "--", "sh", "-c", "exit 3"),
	s("lock", "nightly", "--", "/no/such/command"),
	s("lock", "nightly", "--wait", "0", "--", "true"),
	s("locks"),
	s("get", "state"),
	{args: []string{"put", "leased", "v", "--lease", "123456"}, stderrDiffers: true},
	s("get"),
	// A watch from a revision whose history is gone: ErrCompacted, the
	// same exit code on both (the oldest revision each can serve, in the
	// message, is its own).
	{args: []string{"watch", "--from", "{R+1}", "--count", "1"}, stderrDiffers: true, compact: true, stderrHas: " can serve is "},
	{args: []string{"nosuchverb"}, stderrDiffers: true}, // kv DIR nosuchverb: DIR is the unknown command
}

// compact drops b's history up to its current revision (step.compact).
func compact(t *testing.T, cl *clientv3.Client, b backend, dir string) {
	t.Helper()
	if b.name == "dir" {
		if r := runKV(t, "", nil, dir, "checkpoint"); r.code != 0 {
			t.Fatalf("kv DIR checkpoint: %+v", r)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err == nil {
		_, err = cl.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	}
	if err != nil {
		t.Fatalf("compact the cluster: %v", err)
	}
}

// TestSameOutput runs the table of steps on a data directory and on a
// 3-member cluster, through the kv binary (which runs kv-etcd for
// --etcd), and compares every step's exit code, stdout and stderr, with
// revisions written relative to each backend's revision before the
// first step (normalize). A step's own revision arguments ({R+n}) are
// made absolute for each.
func TestSameOutput(t *testing.T) {
	c := cluster.ForTest(t, memberBin)
	cl := cluster.ClientForTest(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("the cluster holds %d keys, want none", resp.Count)
	}
	dir := filepath.Join(t.TempDir(), "data")
	if r := runKV(t, "", nil, dir, "load"); r.code != 0 {
		t.Fatalf("kv DIR load: %+v", r)
	}
	backends := []backend{
		{name: "dir", target: []string{dir}, base: 0},
		{name: "etcd", target: []string{"--etcd", strings.Join(c.Endpoints(), ",")}, base: resp.Header.Revision},
	}
	compared := 0
	for i, st := range steps {
		var got [2]result
		for j, b := range backends {
			if st.compact {
				compact(t, cl, b, dir)
			}
			args := make([]string, 0, len(b.target)+len(st.args))
			args = append(args, b.target...)
			for _, a := range st.args {
				args = append(args, revArg.ReplaceAllStringFunc(a, func(m string) string {
					n, _ := strconv.ParseInt(revArg.FindStringSubmatch(m)[1], 10, 64)
					return strconv.FormatInt(b.base+n, 10)
				}))
			}
			env := []string{"KV=" + kvBin, "TARGET=" + strings.Join(b.target, " ")}
			r := runKV(t, st.stdin, env, args...)
			r.stdout = normalize(r.stdout, b.base)
			got[j] = r
		}
		name := fmt.Sprintf("step %d: kv %s", i, strings.Join(st.args, " "))
		if got[0].code != got[1].code {
			t.Errorf("%s: exit %d on a directory, %d on etcd\ndir stderr: %setcd stderr: %s", name, got[0].code, got[1].code, got[0].stderr, got[1].stderr)
		}
		if d := cmp.Diff(got[0].stdout, got[1].stdout); d != "" {
			t.Errorf("%s: stdout (-dir +etcd):\n%s", name, d)
		}
		if got[0].code == 2 && got[1].code == 2 {
			// A usage error's hint names each backend's --help: the
			// message is its first line.
			got[0].stderr, _, _ = strings.Cut(got[0].stderr, "\n")
			got[1].stderr, _, _ = strings.Cut(got[1].stderr, "\n")
		}
		for j, b := range backends {
			if !strings.Contains(got[j].stderr, st.stderrHas) {
				t.Errorf("%s: stderr on %s lacks %q:\n%s", name, b.name, st.stderrHas, got[j].stderr)
			}
		}
		if d := cmp.Diff(got[0].stderr, got[1].stderr); d != "" && !st.stderrDiffers {
			t.Errorf("%s: stderr (-dir +etcd):\n%s", name, d)
		}
		t.Logf("%s: exit %d\n%s%s", name, got[1].code, got[1].stdout, got[1].stderr)
		compared++
	}
	if compared != len(steps) {
		t.Errorf("compared %d steps of %d", compared, len(steps))
	}
}
