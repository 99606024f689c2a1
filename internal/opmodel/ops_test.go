package opmodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		op   kv.Op
		ok   bool
		err  string // a part of the error, "" for none
	}{
		{"put", "put k1 v1", kv.PutOp([]byte("k1"), []byte("v1")), true, ""},
		{"del", "del k3", kv.DeleteOp([]byte("k3")), true, ""},
		{"add", "add c -7", kv.AddOp([]byte("c"), -7), true, ""},
		{"tabs and spaces", "\t put  k\tv ", kv.PutOp([]byte("k"), []byte("v")), true, ""},
		{"quoted", `put "a key" "l1\nl2\xff"`, kv.PutOp([]byte("a key"), []byte("l1\nl2\xff")), true, ""},
		{"empty quoted", `put "" ""`, kv.PutOp([]byte{}, []byte{}), true, ""},
		{"blank", "   ", kv.Op{}, false, ""},
		{"comment", "  # put k v", kv.Op{}, false, ""},
		{"too many fields", "put k v extra", kv.Op{}, false, "want 'put KEY VALUE'"},
		{"unknown verb", "get k", kv.Op{}, false, "want 'put KEY VALUE'"},
		{"add of a non-number", "add c 1.5", kv.Op{}, false, `"1.5" is not a decimal int64`},
		{"add past int64", "add c 9223372036854775808", kv.Op{}, false, "is not a decimal int64"},
		{"unterminated quote", `put "k v`, kv.Op{}, false, "bad quoted string"},
		{"no space after a quote", `put "k"v w`, kv.Op{}, false, "no space after quoted string"},
		{"dump line", "k1=v1", kv.PutOp([]byte("k1"), []byte("v1")), true, ""},
		{"dump line, spaces in the value", "k=a b=c ", kv.PutOp([]byte("k"), []byte("a b=c ")), true, ""},
		{"dump line, quoted", `"a key"="l1\nl2"`, kv.PutOp([]byte("a key"), []byte("l1\nl2")), true, ""},
		{"dump line, empty value", "k=", kv.PutOp([]byte("k"), []byte{}), true, ""},
		{"dump line, CRLF", "k=v\r", kv.PutOp([]byte("k"), []byte("v")), true, ""},
		{"dump line, key named put", "put=x y", kv.PutOp([]byte("put"), []byte("x y")), true, ""},
		{"op line with = in the value", "put k a=b", kv.PutOp([]byte("k"), []byte("a=b")), true, ""},
		{"dump line, bad quoted value", `k="v`, kv.Op{}, false, "bad quoted value"},
		{"dump line, no =", `"k" v`, kv.Op{}, false, "no '=' after the key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op, ok, err := ParseLine(tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || ok {
					t.Fatalf("ParseLine(%q) = %+v, %v, %v; want an error with %q", tc.line, op, ok, err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ParseLine(%q): ok %v, %v; want ok %v", tc.line, ok, err, tc.ok)
			}
			if d := cmp.Diff(tc.op, op); d != "" {
				t.Errorf("ParseLine(%q) (-want +got):\n%s", tc.line, d)
			}
		})
	}
}

func TestParse(t *testing.T) {
	ops, err := Parse([]string{"# two operations", "put k v", "", "add c 1"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]kv.Op{kv.PutOp([]byte("k"), []byte("v")), kv.AddOp([]byte("c"), 1)}, ops); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := Parse([]string{"put k v", "", "put k"}); err == nil || !strings.HasPrefix(err.Error(), "line 3: ") {
		t.Errorf("an error on line 3: %v", err)
	}
}

// TestArticle: the fixture holds the article's 17 operations.
func TestArticle(t *testing.T) {
	lines := Article()
	if len(lines) != 17 || lines[0] != "add c 1" || lines[16] != "add d 7" {
		t.Fatalf("Article() = %q", lines)
	}
	if ops := ArticleOps(); len(ops) != 17 {
		t.Errorf("%d operations", len(ops))
	}
}
