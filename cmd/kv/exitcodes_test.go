package main

import (
	"bytes"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exitCodesFile is the Go file that defines kv's exit codes, shared by
// both backends.
const exitCodesFile = "../../internal/kvcli/exit.go"

// TestHelpNamesEveryExitCode: the "Exit status:" list of kv --help names
// each exit code that internal/kvcli/exit.go defines, and no other, so
// that a code added there without a line of help fails here. The
// signal's code, ExitSignaled, is listed as "128+N".
func TestHelpNamesEveryExitCode(t *testing.T) {
	want := definedExitCodes(t, exitCodesFile)
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("kv --help: exit %d, stderr %q", code, errb.String())
	}
	got := helpExitCodes(t, out.String())
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("exit codes in kv --help against %s (-want +got):\n%s", exitCodesFile, d)
	}
}

// definedExitCodes returns the values of the constants named Exit* in
// the Go file name, in order, as help spells them: "128+N" for
// ExitSignaled.
func definedExitCodes(t testing.TB, name string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Exit") {
					continue
				}
				if i >= len(vs.Values) {
					t.Fatalf("%s: %s has no value of its own", name, id.Name)
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					t.Fatalf("%s: %s is not an integer literal", name, id.Name)
				}
				n, ok := constant.Int64Val(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
				if !ok {
					t.Fatalf("%s: %s = %s", name, id.Name, lit.Value)
				}
				code := strconv.FormatInt(n, 10)
				if id.Name == "ExitSignaled" {
					code += "+N"
				}
				codes = append(codes, code)
			}
		}
	}
	if len(codes) == 0 {
		t.Fatalf("%s defines no Exit* constant", name)
	}
	return append([]string{"0"}, sortCodes(codes)...)
}

// exitLine is a line of help's exit-status list: the code, then a phrase.
var exitLine = regexp.MustCompile(`^  ([0-9]+(?:\+N)?) +\S`)

// helpExitCodes returns the codes that the "Exit status:" list of help
// names, in order.
func helpExitCodes(t testing.TB, help string) []string {
	t.Helper()
	_, list, ok := strings.Cut(help, "\nExit status:\n")
	if !ok {
		t.Fatalf("no \"Exit status:\" list in kv --help:\n%s", help)
	}
	var codes []string
	for _, line := range strings.Split(list, "\n") {
		if line == "" {
			break
		}
		if m := exitLine.FindStringSubmatch(line); m != nil {
			codes = append(codes, m[1])
		} else if !strings.HasPrefix(line, "     ") {
			t.Errorf("exit status list: %q is neither a code nor a continued phrase", line)
		}
	}
	if !slices.IsSortedFunc(codes, compareCodes) {
		t.Errorf("exit status list out of order: %q", codes)
	}
	return codes
}

func sortCodes(codes []string) []string {
	slices.SortFunc(codes, compareCodes)
	return codes
}

func compareCodes(a, b string) int {
	n := func(s string) int {
		v, _ := strconv.Atoi(strings.TrimSuffix(s, "+N"))
		return v
	}
	return n(a) - n(b)
}
