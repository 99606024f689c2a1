package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// documents are the repository's documents whose links TestDocLinks
// checks, from the repository's root.
var documents = []string{"README.md", "ARCHITECTURE.md", "FORMAT.md", "docs/*.md", "etcd/README.md", "bench/README.md", "bench/RESULTS.md"}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link of the documents names a file or
// directory that exists, and every #anchor a heading of the document it
// points into, as GitHub makes anchors of headings.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, g := range documents {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil || len(m) == 0 {
			t.Fatalf("no document %s (%v)", g, err)
		}
		docs = append(docs, m...)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, doc)
		for i, line := range proseLines(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %s: %v", name, i+1, target, err)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: link %s: no heading of %s makes the anchor #%s", name, i+1, target, filepath.Base(path), anchor)
				}
			}
		}
	}
	if links < 20 {
		t.Errorf("checked %d links, want at least 20: is the link pattern still right?", links)
	}
}

// TestDocLinksCatchesBrokenOnes: the link check finds a missing file and
// a missing anchor.
func TestDocLinksCatchesBrokenOnes(t *testing.T) {
	a := headingAnchors("# Title\n\n## The `kv` command\n\n```\n## not a heading\n```\n## Past one machine: kv on etcd\n")
	for _, want := range []string{"title", "the-kv-command", "past-one-machine-kv-on-etcd"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
}

// proseLines returns the document's lines with those inside fenced code
// blocks blanked, so that line numbers stay.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			lines[i] = ""
		} else if fence {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub makes of a document's
// headings: lower case, spaces as hyphens, punctuation but hyphens and
// underscores dropped, a repeated one suffixed -1, -2, ...
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestReadmeLibraryExample builds and runs README's library example as a
// program of its own, in a module of its own that points at this clone,
// as README's Install section tells a newcomer to: it must compile, run,
// and print what a first run prints.
func TestReadmeLibraryExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, lib, ok := strings.Cut(string(readme), "\n## Library\n")
	if !ok {
		t.Fatal("README.md has no Library section")
	}
	_, code, ok := strings.Cut(lib, "```go\n")
	if !ok {
		t.Fatal("README.md's Library section has no Go block")
	}
	code, _, _ = strings.Cut(code, "```")
	if !strings.Contains(code, `"github.com/kvstore/kv/kv"`) {
		t.Fatal("README's library example does not import github.com/kvstore/kv/kv")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// The module cache holds what this module needs, verified when
		// this clone's build fetched it: no network.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// README's Install section's go commands, run as written, its clone
	// path this one.
	_, install, ok := strings.Cut(string(readme), "\n## Install\n")
	if !ok {
		t.Fatal("README.md has no Install section")
	}
	install, _, _ = strings.Cut(install, "\n## ")
	run("mod", "init", "example")
	steps := 0
	for _, line := range strings.Split(install, "\n") {
		if !strings.HasPrefix(line, "go mod ") {
			continue
		}
		line = strings.ReplaceAll(line, "/path/to/the/clone", root)
		run(strings.Fields(line)[1:]...)
		steps++
	}
	if steps < 2 {
		t.Fatalf("README's Install section has %d go mod commands, want the edit and the tidy", steps)
	}
	if got, want := run("run", "."), "hello 1 1 <nil>\n"; got != want {
		t.Errorf("README's library example printed %q, want %q", got, want)
	}
}

// TestExitCodesDocumented: docs/operations.md's table of exit codes, the
// only list of them besides kv --help, has a row for each code kv --help
// names, and no other.
func TestExitCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Exit codes\n")
	if !ok {
		t.Fatal("docs/operations.md has no Exit codes section")
	}
	var documented []string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| ") {
			continue
		}
		code := strings.TrimSpace(cells[1])
		if code == "code" || strings.HasPrefix(code, "---") {
			continue
		}
		documented = append(documented, code)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("kv --help: exit %d, stderr %q", code, errb.String())
	}
	help := append([]string{"0"}, helpExitCodes(t, out.String())...)
	slices.Sort(help)
	help = slices.Compact(help)
	slices.Sort(documented)
	if d := cmp.Diff(help, documented); d != "" {
		t.Errorf("exit codes of kv --help (-) against docs/operations.md's table (+):\n%s", d)
	}
}
