package opmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
	}
	got := map[string]string{}
	for in := range tests {
		got[in] = Show([]byte(in))
	}
	if d := cmp.Diff(tests, got); d != "" {
		t.Errorf("Show (-want +got):\n%s", d)
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
// were, and no text makes ParseDump panic.
func FuzzDump(f *testing.F) {
	for _, kv := range [][2]string{{"c", "55"}, {"a=b", "v"}, {`"q`, "l1\nl2"}, {"", ""}, {"\xff", "\x00"}, {"k", `"`}} {
		f.Add(kv[0], kv[1])
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
		ParseDump(k + "\n" + v)
	})
}
