package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadmeSamples runs the command samples of README.md and of the
// documents under docs/ and compares their output with what each shows,
// so that no sample drifts from the code. A sample is a fenced block of
// "$ " lines, each followed by its output: "go run ./cmd/kv ARGS" (optionally fed by "printf 'TEXT' |" or
// by another "go run ./cmd/kv ARGS |", whose stdout it reads), and "ls
// DIR". The kill driver's samples are left out: they are timings.
func TestReadmeSamples(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	samples := 0
	for _, name := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		// Each document's samples run in a directory of their own.
		t.Chdir(t.TempDir())
		samples += docSamples(t, filepath.Base(name), string(b))
	}
	if samples < 5 {
		t.Errorf("found %d samples in README.md and docs/, want at least 5", samples)
	}
}

// docSamples runs the samples of one document in the current directory,
// and returns how many it ran.
func docSamples(t *testing.T, doc, text string) int {
	t.Helper()
	samples := 0
	blocks := strings.Split(text, "```")
	for i := 1; i < len(blocks); i += 2 {
		block := blocks[i]
		if !strings.Contains(block, "$ go run ./cmd/kv ") || strings.Contains(block, "killtest") {
			continue
		}
		var cmdLine string
		var want []string
		flush := func() {
			if cmdLine == "" {
				return
			}
			samples++
			// A blank line separates samples; it is not output.
			for len(want) > 0 && want[len(want)-1] == "" {
				want = want[:len(want)-1]
			}
			got := runSample(t, cmdLine)
			if d := cmp.Diff(strings.Join(want, "\n"), strings.TrimSuffix(got, "\n")); d != "" {
				t.Errorf("%s sample %q: output (-%s +now):\n%s", doc, cmdLine, doc, d)
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n")[1:] {
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				flush()
				cmdLine, want = cmd, nil
				continue
			}
			if cmdLine != "" && (line != "" || len(want) > 0) {
				want = append(want, line)
			}
		}
		flush()
	}
	return samples
}

// runSample runs one sample command line and returns its output, stdout
// then stderr.
func runSample(t *testing.T, line string) string {
	t.Helper()
	if dir, ok := strings.CutPrefix(line, "ls "); ok {
		ents, err := os.ReadDir(filepath.Clean(dir))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return strings.Join(names, "  ")
	}
	stdin := ""
	if p, ok := strings.CutPrefix(line, "printf '"); ok {
		text, rest, ok := strings.Cut(p, "' | ")
		if !ok {
			t.Fatalf("sample %q: cannot read its printf", line)
		}
		stdin, line = strings.ReplaceAll(text, `\n`, "\n"), rest
	}
	args, ok := strings.CutPrefix(line, "go run ./cmd/kv ")
	if !ok {
		t.Fatalf("sample %q: not a kv command", line)
	}
	var stderrs string
	if first, rest, ok := strings.Cut(args, " | go run ./cmd/kv "); ok {
		_, out, errs := kvRun(t, stdin, strings.Fields(first)...)
		stdin, args, stderrs = out, rest, errs
	}
	_, stdout, stderr := kvRun(t, stdin, strings.Fields(args)...)
	stderr = stderrs + stderr
	// go-cmp's diffs use a non-breaking space or a space at random, so
	// that no one compares them byte for byte: the README shows spaces.
	return strings.ReplaceAll(stdout+stderr, "\u00a0", " ")
}
