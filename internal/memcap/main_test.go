package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hogEnv, set in a child's environment, makes TestHog allocate and touch
// that many MiB and hold them for a while: the test binary itself is the
// over-allocating test the wrapper is shown to stop.
const hogEnv = "MEMCAP_TEST_HOG_MIB"

// TestHog is the over-allocating test. It does nothing unless hogEnv is
// set, as the tests below set it for the copy of this binary they run
// under the wrapper.
func TestHog(t *testing.T) {
	s := os.Getenv(hogEnv)
	if s == "" {
		t.Skip("run by TestCeiling* as the child the wrapper measures")
	}
	mib, err := parseSize(s + "MiB")
	if err != nil {
		t.Fatal(err)
	}
	var held [][]byte
	for range mib >> 20 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touched, so resident
		}
		held = append(held, b)
	}
	runtime.KeepAlive(held)
}

// hog runs this test binary's TestHog through the wrapper's run, under
// ceiling, allocating mib MiB.
func hog(t *testing.T, mib string, ceiling int64) result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(hogEnv, mib)
	res, err := run(exe, []string{"-test.run=^TestHog$", "-test.count=1"}, ceiling, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCeilingStopsAHog: a test that allocates 512 MiB under a ceiling
// of 128 MiB is found over it (stopped while it runs, or at exit when it
// ends between two samples), with a peak over the ceiling.
func TestCeilingStopsAHog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peak is read from /proc and wait4's ru_maxrss, as on Linux")
	}
	res := hog(t, "512", 128<<20)
	t.Logf("peak %s, stopped while running: %v, exit code %d", formatSize(res.peak), res.stopped, res.code)
	if !res.over || res.peak <= 128<<20 {
		t.Fatalf("a 512 MiB test under a 128 MiB ceiling: over %v, peak %s", res.over, formatSize(res.peak))
	}
}

// TestCeilingPassesASmallTest: the same test allocating 16 MiB passes
// under 128 MiB, with its exit code and a peak above what it allocated.
func TestCeilingPassesASmallTest(t *testing.T) {
	res := hog(t, "16", 128<<20)
	if res.over || res.code != 0 {
		t.Fatalf("a 16 MiB test under a 128 MiB ceiling: over %v, exit code %d", res.over, res.code)
	}
	if runtime.GOOS == "linux" && res.peak < 16<<20 {
		t.Fatalf("peak %s for a test that touched 16 MiB", formatSize(res.peak))
	}
}

// TestWrapperFailsThePackage runs the command itself as go test runs
// it, on the hog under a low ceiling: it exits 1 and names the package,
// the peak and the ceiling; and it passes on the exit code of a binary
// under the ceiling.
func TestWrapperFailsThePackage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peak is read from /proc and wait4's ru_maxrss, as on Linux")
	}
	if testing.Short() {
		t.Skip("builds the command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "memcap")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "peaks")
	for _, c := range []struct {
		mib    string
		code   int
		stderr string
	}{
		{"512", 1, "memcap: github.com/kvstore/kv/internal/memcap: peak resident memory "},
		{"8", 0, ""},
	} {
		cmd := exec.Command(bin, exe, "-test.run=^TestHog$", "-test.count=1")
		cmd.Env = append(os.Environ(), hogEnv+"="+c.mib, "MEMCAP_CEILING=128MiB", "MEMCAP_LOG="+log)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%s MiB under 128 MiB: exit %d, stderr %q; want exit %d and %q", c.mib, code, stderr.String(), c.code, c.stderr)
		}
		if c.code != 0 && !strings.Contains(stderr.String(), "over the ceiling of 128 MiB") {
			t.Errorf("the failure does not name the ceiling: %q", stderr.String())
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "github.com/kvstore/kv/internal/memcap\t") {
		t.Errorf("MEMCAP_LOG holds %q, want a line for each of the two runs", b)
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"1GiB", 1 << 30}, {"768MiB", 768 << 20}, {"64KiB", 64 << 10}, {"1000", 1000},
		{"", 0}, {"-1MiB", 0}, {"1GB", 0}, {"x", 0}, {"0", 0},
	} {
		got, err := parseSize(c.in)
		if (err != nil) != (c.want == 0) || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}
