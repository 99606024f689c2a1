package main

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestRunSmall runs every row once on tiny sizes, and checks the table:
// four rows, each with a figure for kv, one for its peer, and a ratio.
// No timing is asserted. It needs sqlite3 and flock(1), and skips, saying
// so, without them.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kv and runs it as processes")
	}
	for _, c := range []string{"sqlite3", "flock"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed", c)
		}
	}
	r := &runner{tmp: t.TempDir()}
	if err := r.setup(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.run(&b, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| oneshot\.\S+ .*\| [0-9]+ \| [0-9]+ \| [0-9.]+× \([0-9.]+–[0-9.]+\) \|$`).FindAllString(b.String(), -1)
	if len(rows) != 4 || !strings.Contains(b.String(), "oneshot.lock.cycle") {
		t.Fatalf("%d rows in:\n%s", len(rows), b.String())
	}
	// Every one-shot write went in: the last key of each kv store reads.
	for _, d := range []string{"d1", "d3", "d5"} {
		if out, err := exec.Command(r.kv, r.tmp+"/"+d, "get", "p00k0001").CombinedOutput(); err != nil || string(out) != "value\n" {
			t.Errorf("kv %s get p00k0001: %v %q", d, err, out)
		}
	}
}
