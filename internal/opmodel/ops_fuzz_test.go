package opmodel

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
)

// formatOp writes op as an op line that ParseLine reads back: a key or value
// that is empty, starts with a quote or holds anything but printable ASCII
// other than space is Go-quoted.
func formatOp(op kv.Op) string {
	field := func(b []byte) string {
		s := string(b)
		if s == "" || s[0] == '"' {
			return strconv.Quote(s)
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] >= 0x7f {
				return strconv.Quote(s)
			}
		}
		return s
	}
	switch op.Kind {
	case record.KindPut:
		return "put " + field(op.Key) + " " + field(op.Value)
	case record.KindDelete:
		return "del " + field(op.Key)
	case record.KindAdd:
		return "add " + field(op.Key) + " " + strconv.FormatInt(op.Delta, 10)
	}
	return "?"
}

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
		again := formatOp(op)
		op2, ok2, err := ParseLine(again)
		if err != nil || !ok2 {
			t.Fatalf("ParseLine(%q) = %+v, formatted as %q, which does not parse: %v", line, op, again, err)
		}
		if d := cmp.Diff(op, op2); d != "" {
			t.Fatalf("ParseLine(%q), formatted as %q, reparses differently (-first +again):\n%s", line, again, d)
		}
	})
}
