// Command figcheck fails when README.md, a document under docs/,
// etcd/README.md, ARCHITECTURE.md or bench/README.md quotes a
// benchmark figure that no results file under bench/results/ holds, or
// when bench/RESULTS.md does in a section that links a results file.
//
//	cd bench && go run ./cmd/figcheck
//
// What it checks, in each document (fenced code blocks are skipped):
//
//   - Every ratio ("12×", "0.72× (0.63×–0.80×)", "32.5–51.5×") must be
//     accounted for. A ratio after ≤, ≥, < or > is a goal, not a
//     measurement, and is skipped.
//   - A table that quotes a ratio must be a copy of rows of a results
//     table: the nearest link to a results file before it, in its section,
//     names the file; that file must have a table with every one of the
//     document table's column headers (a link holds in the sections
//     nested in its own); each row is found by its first
//     cell, and every other cell must equal the results file's cell in the
//     column of the same name, character for character.
//   - A sentence outside a table that quotes a ratio must cite the rows it
//     comes from, as `row` ids in backquotes (the first column of a
//     kvbench results table), in the results file linked last before it
//     in its section; then every ratio, and every figure with a unit (MiB,
//     MB/s, ms, µs, s, B) in that sentence must appear in one of the cited
//     rows.
//   - bench/RESULTS.md is the log of rounds of work, most of them
//     measured before results files existed: its figures are checked
//     only in the sections that link a results file (-linked-only), by
//     the rules above; a section with no such link is left as written.
//   - A few ratios that are not benchmark figures (a test's measurement)
//     are listed below with their source; an entry that no longer matches
//     anything fails too, so the list cannot go stale.
//
// It prints what it checked and exits 1 with every failure.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// exemption is a ratio in a document that is not a benchmark figure.
type exemption struct {
	doc     string // base name of the document
	figure  string // the ratio as written
	context string // words of its sentence
	source  string // where the figure comes from
}

var exemptions = []exemption{
	{"docs/limits.md", "1.6×", "heap peaked at", "a measurement of kv's scan under churn (the caveat on Scan), not a benchmark run"},
	{"docs/limits.md", "2.1×", "the map's size when the scan started", "the same measurement"},
}

func main() {
	docs := flag.String("docs", strings.Join(Documents, ","), "documents to check, comma-separated; each may be a glob")
	linkedOnly := flag.String("linked-only", "RESULTS.md", "documents to check only in the sections that link a results file, comma-separated")
	resDir := flag.String("results", "results", "directory of results files")
	verbose := flag.Bool("v", false, "print every figure checked")
	flag.Parse()
	c, err := run(*resDir, split(*docs), split(*linkedOnly))
	if err != nil {
		fmt.Fprintln(os.Stderr, "figcheck:", err)
		os.Exit(2)
	}
	if *verbose {
		for _, l := range c.log {
			fmt.Println(l)
		}
	}
	fmt.Printf("figcheck: %d figures in %d table rows and %d sentences checked against %d results files; %d exempt; %d failures\n",
		c.figures, c.rows, c.sentences, len(c.files), c.exempt, len(c.fails))
	for _, f := range c.fails {
		fmt.Fprintln(os.Stderr, "figcheck:", f)
	}
	if len(c.fails) > 0 {
		os.Exit(1)
	}
}

// Documents are the documents figcheck checks in full, from bench/: the
// README, the docs it links, the etcd module's README and bench's own.
var Documents = []string{"../README.md", "../docs/*.md", "../etcd/README.md", "../ARCHITECTURE.md", "README.md"}

// split splits a comma-separated list of documents, expanding globs.
func split(list string) []string {
	var out []string
	for _, d := range strings.Split(list, ",") {
		if d == "" {
			continue
		}
		if m, err := filepath.Glob(d); err == nil && len(m) > 0 && m[0] != d {
			out = append(out, m...)
			continue
		}
		out = append(out, d)
	}
	return out
}

// run checks docs against the results files in resDir, and the
// sections of linkedOnly that link a results file. Each document is
// named by its path from the repository's root, the directory above
// resDir's parent (bench/results → the root): README.md, bench/README.md.
func run(resDir string, docs, linkedOnly []string) (*checker, error) {
	c, err := newChecker(resDir)
	if err != nil {
		return nil, err
	}
	absRes, err := filepath.Abs(resDir)
	if err != nil {
		return nil, err
	}
	root := filepath.Dir(filepath.Dir(absRes))
	for i, d := range append(slices.Clone(docs), linkedOnly...) {
		b, err := os.ReadFile(d)
		if err != nil {
			return nil, err
		}
		name := d
		if a, err := filepath.Abs(d); err == nil {
			if r, err := filepath.Rel(root, a); err == nil && !strings.HasPrefix(r, "..") {
				name = r
			}
		}
		if i >= len(docs) {
			c.linkedOnly[name] = true
		}
		c.check(name, string(b))
	}
	c.finish()
	return c, nil
}

// table is a markdown table: its header cells and its rows' cells.
type table struct {
	header []string
	rows   [][]string
	line   int // of the header, 1-based
}

func (t *table) col(name string) int { return slices.Index(t.header, name) }

type checker struct {
	files map[string][]table // results file base name → its tables
	fails []string
	log   []string
	used  map[int]bool // exemptions used
	// linkedOnly are the documents checked only in the sections that
	// link a results file.
	linkedOnly map[string]bool
	figures    int
	rows       int
	sentences  int
	exempt     int
}

func newChecker(dir string) (*checker, error) {
	c := &checker{files: map[string][]table{}, used: map[int]bool{}, linkedOnly: map[string]bool{}}
	names, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no results files (*.md) in %s", dir)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		c.files[filepath.Base(n)] = tables(string(b))
	}
	return c, nil
}

func (c *checker) fail(format string, a ...any) { c.fails = append(c.fails, fmt.Sprintf(format, a...)) }

// tables returns every markdown table of a text, outside code blocks.
func tables(text string) []table {
	var ts []table
	var cur *table
	inCode := false
	for i, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "|") {
			if cur != nil {
				ts = append(ts, *cur)
				cur = nil
			}
			continue
		}
		cells := splitRow(l)
		switch {
		case cur == nil:
			cur = &table{header: cells, line: i + 1}
		case isRule(cells):
		default:
			cur.rows = append(cur.rows, cells)
		}
	}
	if cur != nil {
		ts = append(ts, *cur)
	}
	return ts
}

func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	cells := strings.Split(l, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func isRule(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

var (
	// figureRE matches a ratio, a range of ratios ("32.5–51.5×"), or a
	// figure with a unit; group 1 is a goal's comparison sign.
	figureRE  = regexp.MustCompile(`([≤≥<>]\s*)?(\d+(?:\.\d+)?)(?:–(\d+(?:\.\d+)?))?\s?(×|MiB|MB/s|ms|µs|s\b|B\b)`)
	resultsRE = regexp.MustCompile(`results/([A-Za-z0-9._-]+\.md)`)
	rowRefRE  = regexp.MustCompile("`([a-z0-9]+(?:\\.[a-z0-9]+)+)`")
)

// figure is one number of a document with its unit.
type figure struct {
	num, unit string
}

func (f figure) String() string {
	if f.unit == "×" {
		return f.num + "×"
	}
	return f.num + " " + f.unit
}

// figures returns the figures of s that are measurements (goals after ≤,
// ≥, < or > are left out); with ratiosOnly, only the ratios.
func figures(s string, ratiosOnly bool) []figure {
	var fs []figure
	for _, m := range figureRE.FindAllStringSubmatch(s, -1) {
		if m[1] != "" || ratiosOnly && m[4] != "×" {
			continue
		}
		fs = append(fs, figure{m[2], m[4]})
		if m[3] != "" {
			fs = append(fs, figure{m[3], m[4]})
		}
	}
	return fs
}

// check checks one document.
func (c *checker) check(doc, text string) {
	lines := strings.Split(text, "\n")
	// The results file linked last, by the level of the heading it was
	// linked under: a link holds for its section and the sections inside
	// it.
	links := map[int]string{}
	level := 0
	current := func() string {
		for l := level; l >= 0; l-- {
			if f, ok := links[l]; ok {
				return f
			}
		}
		return ""
	}
	inCode := false
	var para []string // the prose paragraph being gathered
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			c.prose(doc, paraLine, strings.Join(para, " "), current())
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "```") {
			flush()
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		switch {
		case strings.HasPrefix(l, "#"):
			flush()
			level = len(l) - len(strings.TrimLeft(l, "#"))
			for k := range links {
				if k >= level {
					delete(links, k)
				}
			}
		case strings.HasPrefix(l, "|"):
			flush()
			j := i
			for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|") {
				j++
			}
			ts := tables(strings.Join(lines[i:j], "\n"))
			if len(ts) == 1 {
				ts[0].line = i + 1
				c.table(doc, ts[0], current())
			}
			i = j - 1
		case l == "":
			flush()
		default:
			if len(para) == 0 {
				paraLine = i + 1
			}
			para = append(para, l)
			// A link to a results file counts from the paragraph it is in.
			if m := resultsRE.FindAllStringSubmatch(l, -1); m != nil {
				links[level] = m[len(m)-1][1]
			}
		}
	}
	flush()
}

// table checks a document's table against the results file.
func (c *checker) table(doc string, t table, results string) {
	quotes := false
	for _, r := range t.rows {
		for _, cell := range r {
			if len(figures(cell, true)) > 0 {
				quotes = true
			}
		}
	}
	if !quotes || results == "" && c.linkedOnly[doc] {
		return
	}
	where := fmt.Sprintf("%s:%d", doc, t.line)
	if results == "" {
		c.fail("%s: a table quotes ratios but no results file is linked before it in its section", where)
		return
	}
	rts, ok := c.files[results]
	if !ok {
		c.fail("%s: the table cites results/%s, which does not exist", where, results)
		return
	}
	var src *table
	for i := range rts {
		all := true
		for _, h := range t.header {
			if rts[i].col(h) < 0 {
				all = false
			}
		}
		if all {
			src = &rts[i]
			break
		}
	}
	if src == nil {
		c.fail("%s: no table of results/%s has the columns %q", where, results, t.header)
		return
	}
	key := src.col(t.header[0])
	for n, r := range t.rows {
		c.rows++
		var sr []string
		for _, cand := range src.rows {
			if key < len(cand) && cand[key] == r[0] {
				sr = cand
				break
			}
		}
		if sr == nil {
			c.fail("%s:%d: row %q is in no table of results/%s", doc, t.line+2+n, r[0], results)
			continue
		}
		for j := 1; j < len(r) && j < len(t.header); j++ {
			k := src.col(t.header[j])
			c.figures += len(figures(r[j], false))
			if k >= len(sr) || sr[k] != r[j] {
				got := ""
				if k < len(sr) {
					got = sr[k]
				}
				c.fail("%s:%d: %q, column %q: the document says %q, results/%s says %q", doc, t.line+2+n, r[0], t.header[j], r[j], results, got)
				continue
			}
			c.log = append(c.log, fmt.Sprintf("%s:%d %q %q = %q (results/%s)", doc, t.line+2+n, r[0], t.header[j], r[j], results))
		}
	}
}

// prose checks the sentences of a paragraph: a sentence that quotes a
// ratio or cites a results row has every figure checked against the rows
// it cites.
func (c *checker) prose(doc string, line int, para, results string) {
	where := fmt.Sprintf("%s:%d", doc, line)
	for _, s := range sentences(para) {
		var cited [][]string
		for _, m := range rowRefRE.FindAllStringSubmatch(s, -1) {
			// Other dotted names in backquotes (`go.mod`) are not rows.
			cited = append(cited, c.findRows(results, m[1])...)
		}
		var ratios []figure
		for _, f := range figures(s, true) {
			if i := c.exemption(doc, f, s); i >= 0 {
				c.exempt++
				c.log = append(c.log, fmt.Sprintf("%s %s exempt: %s", where, f, exemptions[i].source))
				continue
			}
			ratios = append(ratios, f)
		}
		if len(ratios) == 0 && len(cited) == 0 || results == "" && c.linkedOnly[doc] {
			continue
		}
		c.sentences++
		if len(cited) == 0 {
			if results == "" {
				c.fail("%s: %s in %q: no results file is linked before it in its section, and no row cited", where, ratios[0], clip(s))
			} else {
				c.fail("%s: %s in %q cites no row of results/%s (a row id in backquotes)", where, ratios[0], clip(s), results)
			}
			continue
		}
		for _, f := range figures(s, false) {
			if c.exemption(doc, f, s) >= 0 {
				continue
			}
			c.figures++
			found := false
			for _, row := range cited {
				for _, cell := range row {
					if slices.Contains(figures(cell, false), f) {
						found = true
					}
				}
			}
			if !found {
				c.fail("%s: %s in %q is in none of the rows it cites in results/%s", where, f, clip(s), results)
				continue
			}
			c.log = append(c.log, fmt.Sprintf("%s %s found in results/%s", where, f, results))
		}
	}
}

// findRows returns the rows of a results file whose first cell is id:
// one per table (a kvbench results file has the figures and the ratios
// of each row).
func (c *checker) findRows(file, id string) [][]string {
	if file == "" {
		return nil
	}
	var rows [][]string
	for _, t := range c.files[file] {
		for _, r := range t.rows {
			if len(r) > 0 && r[0] == id {
				rows = append(rows, r)
			}
		}
	}
	return rows
}

func (c *checker) exemption(doc string, f figure, sentence string) int {
	for i, e := range exemptions {
		if e.doc == doc && e.figure == f.String() && strings.Contains(sentence, e.context) {
			c.used[i] = true
			return i
		}
	}
	return -1
}

// finish fails on exemptions that matched nothing.
func (c *checker) finish() {
	for i, e := range exemptions {
		if !c.used[i] {
			c.fail("exemption of %s in %s (%q) matches nothing: remove it", e.figure, e.doc, e.context)
		}
	}
}

// sentences splits a paragraph after '.', '!' or '?' followed by a space.
func sentences(p string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p))
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		for i := 0; i+1 < len(data); i++ {
			if (data[i] == '.' || data[i] == '!' || data[i] == '?') && data[i+1] == ' ' {
				return i + 2, data[:i+1], nil
			}
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func clip(s string) string {
	if r := []rune(s); len(r) > 90 {
		return string(r[:87]) + "..."
	}
	return s
}
