package opmodel

import (
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	want := map[string]string{"c": "55", "d": "7", "k1": "v1", "k2": "v2"}
	many := map[string]string{}
	for _, k := range []string{"a", "b", "e", "f", "g", "h", "i", "j", "l"} {
		many[k] = "x"
	}
	for k, v := range want {
		many[k] = v
	}
	tests := []struct {
		name string
		got  map[string]string
		desc string
	}{
		{"article", map[string]string{"c": "110", "d": "14", "k1": "v1", "k2": "v2"}, "c=110 instead of 55, d=14 instead of 7"},
		{"same", want, "same map"},
		{"missing and extra", map[string]string{"c": "55", "d": "7", "k2": "v2", "k3": "v3"}, "k1 missing (want v1), k3=v3 should not exist"},
		{"long value", map[string]string{"c": "55", "d": "7", "k1": strings.Repeat("x", 40), "k2": "v2"}, "k1=xxxxxxxxxxxxxxxxxxxxx... instead of v1"},
		{"quoted", map[string]string{"c": "55", "d": "7", "k1": "a b", "k2": "v2"}, `k1="a b" instead of v1`},
		{"long list", many, "a=x should not exist, b=x should not exist, e=x should not exist, f=x should not exist, " +
			"g=x should not exist, h=x should not exist, i=x should not exist, j=x should not exist, and 1 more keys"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Describe(want, tc.got); got != tc.desc {
				t.Errorf("got %q, want %q", got, tc.desc)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	got := Summary(map[string]string{"k2": "v2", "c": "55", "a=b": "l1\nl2"})
	if want := `"a=b"="l1\nl2" c=55 k2=v2`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDiff(t *testing.T) {
	want := map[string]string{"a": "1", "b": "2", "c": "3"}
	got := map[string]string{"a": "1", "b": "20", "d": "4"}
	const expect = "-\t\"b\": \"2\"\n+\t\"b\": \"20\"\n-\t\"c\": \"3\"\n+\t\"d\": \"4\"\n"
	if d := Diff(want, got); d != expect {
		t.Errorf("Diff = %q, want %q", d, expect)
	}
	if d := Diff(want, want); d != "" || !Equal(want, want) || Equal(want, got) {
		t.Errorf("equal maps: Diff %q, Equal %v; unequal: Equal %v", d, Equal(want, want), Equal(want, got))
	}
}
