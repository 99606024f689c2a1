package opmodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
)

func TestShow(t *testing.T) {
	tests := map[string]string{
		"plain":    "plain",
		"a b":      "a b",
		"a=b":      `"a=b"`,
		"l1\nl2":   `"l1\nl2"`,
		"\xff":     `"\xff"`,
		`"quoted"`: `"\"quoted\""`,
		"tab\t":    `"tab\t"`,
		"":         "",
		" lead":    `" lead"`,
		"trail ":   `"trail "`,
		"#hash":    "#hash",
	}
	got := map[string]string{}
	for in := range tests {
		got[in] = Show([]byte(in))
	}
	if d := cmp.Diff(tests, got); d != "" {
		t.Errorf("Show (-want +got):\n%s", d)
	}
}

// TestShowKey: a key is quoted also for a space and a leading '#', so
// that its dump line reads as neither an op line nor a comment.
func TestShowKey(t *testing.T) {
	tests := map[string]string{
		"plain": "plain",
		"a b":   `"a b"`,
		"put k": `"put k"`,
		"#k":    `"#k"`,
		"k#":    "k#",
		"a=b":   `"a=b"`,
		`a"b`:   `a"b`,
		"":      "",
		"\x00":  `"\x00"`,
		"é":     "é",
	}
	got := map[string]string{}
	for in := range tests {
		got[in] = ShowKey([]byte(in))
	}
	if d := cmp.Diff(tests, got); d != "" {
		t.Errorf("ShowKey (-want +got):\n%s", d)
	}
}

func TestParseDump(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"article", "c=55\nd=7\nk1=v1\n", map[string]string{"c": "55", "d": "7", "k1": "v1"}},
		{"empty", "", map[string]string{}},
		{"equals in value", `k="a=b"` + "\n", map[string]string{"k": "a=b"}},
		{"quoted key", `"a=b"=v` + "\n", map[string]string{"a=b": "v"}},
		{"binary", `"\xff"="l1\nl2"` + "\n", map[string]string{"\xff": "l1\nl2"}},
		{"empty value", "k=\n", map[string]string{"k": ""}},
		{"spaces", `"a key"=a value` + "\n", map[string]string{"a key": "a value"}},
		{"a key like an op line", `"put k"=v` + "\n", map[string]string{"put k": "v"}},
		{"a key like a comment", `"#k"=v` + "\n", map[string]string{"#k": "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDump(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if again := Dump(got); again != tc.in {
				t.Errorf("Dump of the parsed map: %q, want %q", again, tc.in)
			}
		})
	}
	for _, bad := range []string{"no equals sign\n", `"unterminated=v` + "\n", `"k"v` + "\n", `k="v` + "\n"} {
		if m, err := ParseDump(bad); err == nil {
			t.Errorf("ParseDump(%q) = %v, want an error", bad, m)
		}
	}
}

// FuzzDump: any key and value read back from their dump line as they
// were, through ParseDump and through kv load's ParseLine (as a put),
// and no text makes ParseDump panic.
func FuzzDump(f *testing.F) {
	for _, p := range [][2]string{{"c", "55"}, {"a=b", "v"}, {`"q`, "l1\nl2"}, {"", ""}, {"\xff", "\x00"}, {"k", `"`},
		{"put k", "v"}, {"#k", " v "}, {"k", "a b=c"}, {"a key", ""}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, k, v string) {
		line := DumpLine([]byte(k), []byte(v))
		m, err := ParseDump(line)
		if err != nil {
			t.Fatalf("DumpLine(%q, %q) = %q, which does not parse: %v", k, v, line, err)
		}
		if d := cmp.Diff(map[string]string{k: v}, m); d != "" {
			t.Fatalf("DumpLine(%q, %q) = %q reads back differently (-want +got):\n%s", k, v, line, d)
		}
		op, ok, err := ParseLine(strings.TrimSuffix(line, "\n"))
		if err != nil || !ok {
			t.Fatalf("DumpLine(%q, %q) = %q, which kv load does not read: ok %v, %v", k, v, line, ok, err)
		}
		if d := cmp.Diff(kv.PutOp([]byte(k), []byte(v)), op); d != "" {
			t.Fatalf("DumpLine(%q, %q) = %q loads as another operation (-want +got):\n%s", k, v, line, d)
		}
		ParseDump(k + "\n" + v)
	})
}
