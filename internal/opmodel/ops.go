package opmodel

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
)

// ParseLine reads one line of kv load's input: an op line, "put KEY
// VALUE", "del KEY" or "add KEY N", fields separated by spaces or tabs, a
// KEY or VALUE that starts with a double quote read as a Go-quoted
// string, N a decimal int64; or a dump line, KEY=VALUE as kv dump prints
// it (DumpLine), read as "put KEY VALUE". A line that starts with a
// double quote, or whose first field holds an '=', is a dump line. ok is
// false for a blank line and a comment (a line whose first non-blank
// byte is '#'), and with an error.
func ParseLine(line string) (op kv.Op, ok bool, err error) {
	t := strings.TrimSpace(line)
	if t == "" || t[0] == '#' {
		return kv.Op{}, false, nil
	}
	if isDumpLine(line) {
		k, v, err := parseDumpLine(strings.TrimLeft(line, " \t"))
		if err != nil {
			return kv.Op{}, false, err
		}
		return kv.PutOp([]byte(k), []byte(v)), true, nil
	}
	f, err := fields(line)
	if err != nil {
		return kv.Op{}, false, err
	}
	bad := func() (kv.Op, bool, error) {
		return kv.Op{}, false, fmt.Errorf("%q: want 'put KEY VALUE', 'del KEY', 'add KEY N' or a dump line KEY=VALUE", line)
	}
	switch f[0] {
	case "put":
		if len(f) != 3 {
			return bad()
		}
		return kv.PutOp([]byte(f[1]), []byte(f[2])), true, nil
	case "del":
		if len(f) != 2 {
			return bad()
		}
		return kv.DeleteOp([]byte(f[1])), true, nil
	case "add":
		if len(f) != 3 {
			return bad()
		}
		d, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return kv.Op{}, false, fmt.Errorf("add %s: %q is not a decimal int64", f[1], f[2])
		}
		return kv.AddOp([]byte(f[1]), d), true, nil
	}
	return bad()
}

// OpLine returns op as an op line that ParseLine reads back as op, without
// a newline: a key or value that is empty, starts with a double quote,
// or holds a byte that is not printable ASCII or is a space, is
// Go-quoted.
func OpLine(op kv.Op) string {
	field := func(b []byte) string {
		s := string(b)
		if s == "" || s[0] == '"' {
			return strconv.Quote(s)
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] >= 0x7f {
				return strconv.Quote(s)
			}
		}
		return s
	}
	switch op.Kind {
	case record.KindPut:
		return "put " + field(op.Key) + " " + field(op.Value)
	case record.KindDelete:
		return "del " + field(op.Key)
	case record.KindAdd:
		return "add " + field(op.Key) + " " + strconv.FormatInt(op.Delta, 10)
	}
	return fmt.Sprintf("op of kind %d", op.Kind)
}

// fields splits a line on spaces and tabs; a field that starts with a
// double quote is a Go-quoted string.
func fields(line string) ([]string, error) {
	var out []string
	s := strings.TrimSpace(line)
	for s != "" {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string at %q", s)
			}
			u, _ := strconv.Unquote(q)
			out = append(out, u)
			s = s[len(q):]
			if s != "" && s[0] != ' ' && s[0] != '\t' {
				return nil, fmt.Errorf("no space after quoted string %s", q)
			}
		} else {
			i := strings.IndexAny(s, " \t")
			if i < 0 {
				i = len(s)
			}
			out = append(out, s[:i])
			s = s[i:]
		}
		s = strings.TrimLeft(s, " \t")
	}
	return out, nil
}

// Parse reads op lines with ParseLine, skipping blank lines and comments.
// An error names its line, counted from 1.
func Parse(lines []string) ([]kv.Op, error) {
	var ops []kv.Op
	for i, line := range lines {
		op, ok, err := ParseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if ok {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

//go:embed testdata/article.ops
var articleText string

// Article returns the article's workload as op lines: ten
// increments, five puts, a delete and one more increment (add c 1 ...
// add c 10, put k1 v1 ... put k5 v5, del k3, add d 7). Its map is c=55,
// d=7, k1=v1, k2=v2, k4=v4, k5=v5; the article's bug applies the
// increments twice: c=110, d=14.
func Article() []string {
	var lines []string
	for _, line := range strings.Split(articleText, "\n") {
		if _, ok, _ := ParseLine(line); ok {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// ArticleOps returns the operations of Article.
func ArticleOps() []kv.Op {
	ops, err := Parse(Article())
	if err != nil {
		panic(err) // the embedded fixture is part of the build
	}
	return ops
}
