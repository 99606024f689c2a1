package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/bench/internal/pagecache"
)

// TestMain lets the test binary serve as the benchmark's child process.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "-child" {
		if err := runChild(os.Args[2]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestShort runs the -short benchmark end to end (the stores built, the
// kv and bbolt commands built and run, every child, every check; cold
// opens by posix_fadvise, which leaves the machine's other caches
// alone), then shows the report's check failing on a report with a row
// left out or a figure missing. No timing is asserted.
func TestShort(t *testing.T) {
	dir := t.TempDir()
	out, save := filepath.Join(dir, "out.md"), filepath.Join(dir, "out.json")
	c := shortConfig()
	c.Cold = pagecache.Fadvise
	if err := run(c, "", filepath.Join(dir, "stores"), "", "", out, save); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if err := checkReport(text); err != nil {
		t.Fatalf("the report of a whole run fails its check: %v", err)
	}
	for _, want := range []string{
		fmt.Sprintf("%d warm reopens per engine and round", c.ReopenRuns),
		fmt.Sprintf("in %d slices, the engines in turn", c.GetSlices),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report does not say %q", want)
		}
	}
	for _, row := range rows {
		if n := strings.Count(text, "| "+row.id+" |"); n != 2 {
			t.Errorf("row %s is in the report %d times, want 2 (figures and ratios)", row.id, n)
		}
		// Each row left out of the report, in either table, fails the
		// check, naming the row.
		for _, table := range []string{"## Figures", "## Ratios"} {
			broken := dropRow(text, table, row.id)
			if broken == text {
				t.Fatalf("row %s not found under %s", row.id, table)
			}
			if err := checkReport(broken); err == nil || !strings.Contains(err.Error(), row.id) {
				t.Errorf("the report without row %s under %s passed its check (%v)", row.id, table, err)
			}
		}
	}
	// A figure that is missing (n/a where kv has one, or bbolt's ratio)
	// fails too.
	for _, c := range []struct {
		heading string
		cell    int
	}{{"## Figures", 2}, {"## Ratios", 1}} {
		broken := setCell(text, c.heading, "reopen.warm.s", c.cell, "n/a")
		if broken == text {
			t.Fatalf("no cell %d of reopen.warm.s under %s", c.cell, c.heading)
		}
		if err := checkReport(broken); err == nil {
			t.Errorf("a report with cell %d of reopen.warm.s under %s missing passed its check", c.cell, c.heading)
		}
	}
	// The saved run renders the same report again.
	var s saved
	jb, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb, &s); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	report(&again, s)
	if again.String() != text {
		t.Errorf("the saved run renders another report:\n%s\nwant:\n%s", again.String(), text)
	}
}

// dropRow returns text without the line of row id in the table under
// heading.
func dropRow(text, heading, id string) string {
	i := strings.Index(text, heading)
	if i < 0 {
		return text
	}
	j := strings.Index(text[i:], "\n| "+id+" |")
	if j < 0 {
		return text
	}
	start := i + j + 1
	end := strings.Index(text[start:], "\n")
	return text[:start] + text[start+end+1:]
}

// setCell returns text with cell i (0 is the row id) of row id in the
// table under heading set to v.
func setCell(text, heading, id string, i int, v string) string {
	h := strings.Index(text, heading)
	if h < 0 {
		return text
	}
	j := strings.Index(text[h:], "\n| "+id+" |")
	if j < 0 {
		return text
	}
	start := h + j + 1
	end := start + strings.Index(text[start:], "\n")
	cells := strings.Split(strings.Trim(text[start:end], "|"), "|")
	cells[i] = " " + v + " "
	return text[:start] + "|" + strings.Join(cells, "|") + "|" + text[end:]
}

// TestChildChecks shows the children's checks failing: a store that
// lacks keys (the random Gets miss one, the scan counts too few), and a
// wrong value.
func TestChildChecks(t *testing.T) {
	for _, e := range engines {
		t.Run(e, func(t *testing.T) {
			dir := t.TempDir()
			if err := build(e, dir, 500); err != nil {
				t.Fatal(err)
			}
			arg := func(name string, keys int) string {
				b, _ := json.Marshal(task{Name: name, Engine: e, Dir: dir, Keys: keys, GetDur: 20 * time.Millisecond, Key: keys - 1})
				return string(b)
			}
			// The control: the store as built passes.
			for _, name := range []string{"reopen", "read", "oneshot"} {
				if err := runChildQuiet(t, arg(name, 500)); err != nil {
					t.Errorf("%s on the whole store: %v", name, err)
				}
			}
			// The data set has 500 keys: a child told of 600 misses some.
			if err := runChildQuiet(t, arg("read", 600)); err == nil {
				t.Errorf("read passed on a store missing keys")
			}
			if err := runChildQuiet(t, arg("oneshot", 600)); err == nil {
				t.Errorf("oneshot passed on a key the store lacks")
			}
		})
	}
	var k [keySize]byte
	var v [valueSize]byte
	key := dataset.Key(k[:], 3)
	wrong := bytes.Clone(dataset.Value(v[:], key, 0))
	wrong[valueSize-1] ^= 1
	if err := dataset.CheckAt(key, wrong, 0); err == nil {
		t.Errorf("a wrong value passed checkValue")
	}
	if err := dataset.CheckAt(key, dataset.Value(v[:], key, 0), 0); err != nil {
		t.Errorf("the right value failed: %v", err)
	}
}

// TestOutputChecks shows the checks of the one-shot commands' output
// failing on a wrong value, a value cut short and, for bbolt's command,
// a value without its newline.
func TestOutputChecks(t *testing.T) {
	var k [keySize]byte
	var v [valueSize]byte
	key := dataset.Key(k[:], 7)
	good := bytes.Clone(dataset.Value(v[:], key, 0))
	wrong := bytes.Clone(good)
	wrong[20] ^= 1
	for _, c := range []struct {
		name  string
		check func(key, out []byte) error
		out   []byte
		ok    bool
	}{
		{"kv right", checkGen0, good, true},
		{"kv wrong", checkGen0, wrong, false},
		{"kv short", checkGen0, good[:valueSize-1], false},
		{"kv with a newline", checkGen0, append(bytes.Clone(good), '\n'), false},
		{"bbolt right", checkBoltOutput, append(bytes.Clone(good), '\n'), true},
		{"bbolt wrong", checkBoltOutput, append(bytes.Clone(wrong), '\n'), false},
		{"bbolt no newline", checkBoltOutput, good, false},
		{"oneshot silent", checkOneshotOutput, nil, true},
		{"oneshot printed", checkOneshotOutput, []byte("x"), false},
	} {
		if err := c.check(key, c.out); (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// runChildQuiet runs a child task in this process, its JSON output
// discarded.
func runChildQuiet(t *testing.T, arg string) error {
	t.Helper()
	stdout := os.Stdout
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	os.Stdout = null
	defer func() { os.Stdout = stdout }()
	return runChild(arg)
}

// TestServeSlices shows a read child answering its parent's slices, and
// failing on a request it cannot serve rather than answering it wrong.
func TestServeSlices(t *testing.T) {
	calls := 0
	get := func([]byte) ([]byte, error) { calls++; return nil, nil }
	gets := func(fn func([]byte) ([]byte, error), d time.Duration) (int, error) {
		fn(nil)
		return int(d), nil // as many Gets as nanoseconds asked, to tell the answers apart
	}
	var out bytes.Buffer
	if err := serveSlices(strings.NewReader("get 7\nowned 9\n"), &out, get, get, gets); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 4 || lines[0] != "ready" || !strings.HasPrefix(lines[1], "7 ") || !strings.HasPrefix(lines[2], "9 ") || calls != 2 {
		t.Errorf("answers %q after %d Gets, want ready, 7 and 9 Gets after 2", out.String(), calls)
	}
	for _, bad := range []string{"get\n", "get x\n", "get 0\n", "scan 5\n", "owned 5\n"} {
		owned := get
		if bad == "owned 5\n" {
			owned = nil // not kv
		}
		if err := serveSlices(strings.NewReader(bad), io.Discard, get, owned, gets); err == nil {
			t.Errorf("request %q was served", bad)
		}
	}
}
