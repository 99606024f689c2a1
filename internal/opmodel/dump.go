package opmodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Show returns a value as kv dump shows it: as it is when that is
// unambiguous at the end of a KEY=VALUE line, and Go-quoted otherwise:
// bytes that are not printable UTF-8, '=', a newline, a leading double
// quote, or a leading or trailing space (which an editor or a shell
// would lose).
func Show(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) || strings.ContainsAny(s, "=\n\r") || strings.HasPrefix(s, `"`) ||
		strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// ShowKey returns a key as kv dump shows it: as Show does, and Go-quoted
// also when it holds a space or starts with '#', so that a dump line
// never reads as an op line or a comment (see ParseLine).
func ShowKey(b []byte) string {
	s := Show(b)
	if s == string(b) && (strings.Contains(s, " ") || strings.HasPrefix(s, "#")) {
		return strconv.Quote(s)
	}
	return s
}

// DumpLine is the line kv dump prints for a key: KEY=VALUE, the key shown
// by ShowKey and the value by Show, and a newline. ParseLine reads it
// back as "put KEY VALUE", so kv load copies what kv dump printed.
func DumpLine(key, value []byte) string {
	return ShowKey(key) + "=" + Show(value) + "\n"
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
		k, v, err := parseDumpLine(line)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// isDumpLine reports whether line, which is neither blank nor a comment,
// is a dump line rather than an op line: it starts with a quoted key, or
// its first field holds the '='. An op line's first field is its verb.
func isDumpLine(line string) bool {
	s := strings.TrimLeft(line, " \t")
	if strings.HasPrefix(s, `"`) {
		return true
	}
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		s = s[:i]
	}
	return strings.Contains(s, "=")
}

// parseDumpLine reads one KEY=VALUE line (without its newline; a
// trailing carriage return, which Show never leaves unquoted, is taken
// for a CRLF line end and dropped).
func parseDumpLine(line string) (string, string, error) {
	line = strings.TrimSuffix(line, "\r")
	var k, v string
	if strings.HasPrefix(line, `"`) {
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			return "", "", fmt.Errorf("dump line %q: bad quoted key", line)
		}
		k, _ = strconv.Unquote(q)
		rest, ok := strings.CutPrefix(line[len(q):], "=")
		if !ok {
			return "", "", fmt.Errorf("dump line %q: no '=' after the key", line)
		}
		v = rest
	} else {
		var ok bool
		k, v, ok = strings.Cut(line, "=")
		if !ok {
			return "", "", fmt.Errorf("dump line %q: no '='", line)
		}
	}
	if strings.HasPrefix(v, `"`) {
		u, err := strconv.Unquote(v)
		if err != nil {
			return "", "", fmt.Errorf("dump line %q: bad quoted value", line)
		}
		v = u
	}
	return k, v, nil
}
