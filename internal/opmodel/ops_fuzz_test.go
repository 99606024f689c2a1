package opmodel

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseOp feeds arbitrary lines to ParseLine, the one parser of op
// lines (kv load's input, the checkers' workloads), seeded from
// testdata/load-lines.txt: it never panics, and a line it accepts formats
// back to a line that parses to the same operation.
func FuzzParseOp(f *testing.F) {
	file, err := os.Open("testdata/load-lines.txt")
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(file)
	seeds := 0
	for sc.Scan() {
		f.Add(sc.Text())
		seeds++
	}
	file.Close()
	if err := sc.Err(); err != nil || seeds < 10 {
		f.Fatalf("seeds from testdata/load-lines.txt: %d, %v", seeds, err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		op, ok, err := ParseLine(line)
		if err != nil {
			if ok {
				t.Fatalf("ParseLine(%q): ok with an error %v", line, err)
			}
			return
		}
		if !ok {
			if s := strings.TrimSpace(line); s != "" && s[0] != '#' {
				t.Fatalf("ParseLine skipped %q, which is neither blank nor a comment", line)
			}
			return
		}
		again := OpLine(op)
		op2, ok2, err := ParseLine(again)
		if err != nil || !ok2 {
			t.Fatalf("ParseLine(%q) = %+v, formatted as %q, which does not parse: %v", line, op, again, err)
		}
		if d := cmp.Diff(op, op2); d != "" {
			t.Fatalf("ParseLine(%q), formatted as %q, reparses differently (-first +again):\n%s", line, again, d)
		}
	})
}
