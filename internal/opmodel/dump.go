package opmodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Show returns b as kv dump shows a key or value: as it is when that is
// unambiguous in a KEY=VALUE line, and Go-quoted otherwise: bytes that
// are not printable UTF-8, '=', a newline, or a leading double quote.
func Show(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) || strings.ContainsAny(s, "=\n\r") || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// DumpLine is the line kv dump prints for a key: KEY=VALUE, each shown
// by Show, and a newline.
func DumpLine(key, value []byte) string {
	return Show(key) + "=" + Show(value) + "\n"
}

// Dump returns m as kv dump prints a map: a DumpLine per key, in key
// order. Two maps are equal when their dumps are.
func Dump(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(DumpLine([]byte(k), []byte(m[k])))
	}
	return b.String()
}

// ParseDump reads the lines of kv dump back into a map: a key or value
// that Show quoted is unquoted.
func ParseDump(text string) (map[string]string, error) {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		var k, v string
		if strings.HasPrefix(line, `"`) {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("dump line %q: bad quoted key", line)
			}
			k, _ = strconv.Unquote(q)
			rest, ok := strings.CutPrefix(line[len(q):], "=")
			if !ok {
				return nil, fmt.Errorf("dump line %q: no '=' after the key", line)
			}
			v = rest
		} else {
			var ok bool
			k, v, ok = strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("dump line %q: no '='", line)
			}
		}
		if strings.HasPrefix(v, `"`) {
			u, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("dump line %q: bad quoted value", line)
			}
			v = u
		}
		m[k] = v
	}
	return m, nil
}
