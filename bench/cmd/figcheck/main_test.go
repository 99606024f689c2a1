package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A results file as kvbench writes one, cut down.
const results = `# kvbench results

- commit: abc

## Ratios

| row | workload | kv ÷ pebble | kv ÷ walmap |
|---|---|---|---|
| get1.warm.ops | random Get, 1 goroutine, warm ↑ | 8.10× (7.90×–8.30×) | 1.38× (1.30×–1.41×) |
| load.rss | peak RSS: load, close ↓ | 6.25× | 1.02× |

## Figures

| row | workload | kv | pebble |
|---|---|---|---|
| load.rss | peak RSS: load, close ↓ | 223 MiB | 36 MiB |
`

const goodDoc = `# kv

## Performance

From [the run](bench/results/run.md):

| workload | kv ÷ walmap |
|---|---|
| random Get, 1 goroutine, warm ↑ | 1.38× (1.30×–1.41×) |

### Reading it

Warm random Gets on one goroutine are 1.38× walmap's (` + "`get1.warm.ops`" + `).
A load peaks at 223 MiB of RSS (` + "`load.rss`" + `), pebble's at 36 MiB.
The goal was ≥ 3× and ≤ 2× raw + 64.

## Caveats

In a test that rewrote keys while a scan stood, the heap peaked at 1.6× that without the scan (2.1× the map's size when the scan started).
`

func check(t *testing.T, doc string) *checker {
	t.Helper()
	dir := t.TempDir()
	res := filepath.Join(dir, "bench", "results")
	if err := os.MkdirAll(res, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(res, "run.md"), []byte(results), 0o644); err != nil {
		t.Fatal(err)
	}
	// The exemptions are of docs/limits.md: the document is checked
	// under that name.
	name := filepath.Join(dir, "docs", "limits.md")
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := run(res, []string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGoodDoc(t *testing.T) {
	c := check(t, goodDoc)
	if len(c.fails) > 0 {
		t.Fatalf("a correct document failed:\n%s", strings.Join(c.fails, "\n"))
	}
	if c.rows != 1 || c.sentences != 2 || c.exempt != 2 {
		t.Errorf("checked %d rows, %d sentences, %d exempt; want 1, 2, 2", c.rows, c.sentences, c.exempt)
	}
}

// TestCatches changes a correct document in the ways a stale or invented
// figure would, and expects each to fail with a message that says why.
func TestCatches(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"table cell", "| 1.38× (1.30×–1.41×) |", "| 1.38× (1.30×–1.42×) |", `column "kv ÷ walmap"`},
		{"table row not in results", "| random Get, 1 goroutine, warm ↑ |", "| random Get, 1 goroutine ↑ |", "is in no table"},
		{"table column not in results", "| workload | kv ÷ walmap |", "| workload | kv ÷ bbolt |", "no table of results/run.md has the columns"},
		{"table without a link", "From [the run](bench/results/run.md):", "From the run:", "no results file is linked"},
		{"link to a missing file", "bench/results/run.md", "bench/results/old.md", "does not exist"},
		{"ratio in prose", "are 1.38× walmap's", "are 12× walmap's", "12× in"},
		{"ratio without a row", "walmap's (`get1.warm.ops`).", "walmap's.", "cites no row"},
		{"unknown row", "`get1.warm.ops`", "`get1.cold.ops`", "cites no row"},
		{"size in a cited sentence", "at 223 MiB", "at 232 MiB", "232 MiB in"},
		{"the other engine's size", "pebble's at 36 MiB", "pebble's at 38 MiB", "38 MiB in"},
		{"link in a sibling section", "### Reading it", "## Reading it", "no results file is linked"},
		{"exemption gone stale", "heap peaked at 1.6×", "heap grew by half", "matches nothing"},
		{"exemption's figure changed", "heap peaked at 1.6×", "heap peaked at 1.7×", "1.7× in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodDoc, tc.old) {
				t.Fatalf("the document has no %q", tc.old)
			}
			c := check(t, strings.Replace(goodDoc, tc.old, tc.new, 1))
			all := strings.Join(c.fails, "\n")
			if !strings.Contains(all, tc.want) {
				t.Fatalf("want a failure mentioning %q, got:\n%s", tc.want, all)
			}
		})
	}
}

func TestFigures(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"47.8× (32.5–51.5×)", "47.8× 32.5× 51.5×"},
		{"0.72× (0.63×–0.80×)", "0.72× 0.63× 0.80×"},
		{"≥ 1.5× and < 1×, ≤ 2×raw", ""},
		{"223 MiB, 234 B, 703 ms, 1.31 s, 412 µs, 258 MB/s", "223 MiB 234 B 703 ms 1.31 s 412 µs 258 MB/s"},
		{"3 seconds, 16 writers, 1M keys, 100-byte", ""},
	} {
		var got []string
		for _, f := range figures(tc.in, false) {
			got = append(got, f.String())
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("figures(%q) = %q, want %q", tc.in, g, tc.want)
		}
	}
}

// TestRepository runs the check on this repository's READMEs, as CI does.
func TestRepository(t *testing.T) {
	// The documents main checks, from here (bench/cmd/figcheck, two
	// levels below bench/).
	var docs []string
	for _, d := range Documents {
		docs = append(docs, "../../"+d)
	}
	c, err := run("../../results", split(strings.Join(docs, ",")), []string{"../../RESULTS.md"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.fails) > 0 {
		t.Fatalf("%d figures fail:\n%s", len(c.fails), strings.Join(c.fails, "\n"))
	}
}

// TestLinkedOnly: a document checked only where it links a results file
// (bench/RESULTS.md) has its linked sections checked as any other, and
// its other sections left alone.
func TestLinkedOnly(t *testing.T) {
	const log = `# Benchmark results

## An old round

| what | before | after |
|---|---|---|
| puts | 1 | 3.5× |

Puts went 3.5× faster.

## A round with a results file

From [the run](results/run.md): warm random Gets on one goroutine are 1.38× walmap's (` + "`get1.warm.ops`" + `).
`
	dir := t.TempDir()
	res := filepath.Join(dir, "bench", "results")
	if err := os.MkdirAll(res, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(res, "run.md"), []byte(results), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "docs", "limits.md")
	if err := os.MkdirAll(filepath.Dir(readme), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, []byte(goodDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "bench", "RESULTS.md")
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"good", log, ""},
		{"a wrong figure in the linked section", strings.Replace(log, "are 1.38×", "are 1.48×", 1), "1.48× in"},
		{"a ratio without a row in the linked section", strings.Replace(log, " (`get1.warm.ops`)", "", 1), "cites no row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(name, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := run(res, []string{readme}, []string{name})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(c.fails, "\n")
			if tc.want == "" {
				if all != "" {
					t.Fatalf("a correct document failed:\n%s", all)
				}
				if c.sentences != 3 {
					t.Errorf("checked %d sentences, want 3: docs/limits.md's 2 and the linked section's 1", c.sentences)
				}
				return
			}
			if !strings.Contains(all, tc.want) {
				t.Fatalf("want a failure mentioning %q, got:\n%s", tc.want, all)
			}
		})
	}
	// The same old section in a document checked everywhere fails.
	if err := os.WriteFile(name, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := run(res, []string{readme, name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.fails) == 0 {
		t.Error("the old section passed in a document checked everywhere")
	}
}
