package opmodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/kv"
)

// TestReplayArticle: the article's operations leave c=55 and d=7, and
// every prefix has its own map.
func TestReplayArticle(t *testing.T) {
	h, err := Replay(ArticleOps())
	if err != nil {
		t.Fatal(err)
	}
	if h.Records() != 17 || h.Revision() != 17 {
		t.Fatalf("%d records, revision %d; want 17 and 17", h.Records(), h.Revision())
	}
	want := map[string]string{"c": "55", "d": "7", "k1": "v1", "k2": "v2", "k4": "v4", "k5": "v5"}
	if d := cmp.Diff(want, h.Map(17)); d != "" {
		t.Errorf("after 17 (-want +got):\n%s", d)
	}
	for k, want := range map[int]string{0: "", 1: "c=1\n", 10: "c=55\n", 12: "c=55\nk1=v1\nk2=v2\n"} {
		if got := h.Dump(k); got != want {
			t.Errorf("Dump(%d) = %q, want %q", k, got, want)
		}
	}
}

func TestHistoryCommit(t *testing.T) {
	h := NewHistory(map[string]string{"n": "1", "s": "text"}, 7)
	if err := h.Commit([]kv.Op{kv.AddOp([]byte("n"), 2), kv.AddOp([]byte("s"), 1)}); err == nil {
		t.Fatal("an add to a value that is not an integer committed")
	}
	if h.Records() != 0 || h.Revision() != 7 || h.Dump(0) != "n=1\ns=text\n" {
		t.Fatalf("a failed record changed the history: %d records, revision %d, %q", h.Records(), h.Revision(), h.Dump(0))
	}
	if err := h.Commit([]kv.Op{kv.AddOp([]byte("n"), 2), kv.DeleteOp([]byte("missing")), kv.PutOp([]byte("new"), []byte("v"))}); err != nil {
		t.Fatal(err)
	}
	if h.Records() != 1 || h.Revision() != 8 || h.Dump(1) != "n=3\nnew=v\ns=text\n" {
		t.Errorf("after one record: %d records, revision %d, %q", h.Records(), h.Revision(), h.Dump(1))
	}
	e, ok := h.Lookup([]byte("new"))
	if !ok || e.CreateRev != 8 || e.ModRev != 8 || e.Version != 1 {
		t.Errorf("Lookup(new) = %+v, %v; want created and changed at 8, version 1", e, ok)
	}
	if e, _ := h.Lookup([]byte("s")); e.CreateRev != 1 {
		t.Errorf("a base key: %+v, want created at 1", e)
	}
}

func TestReplayRefuses(t *testing.T) {
	_, err := Replay([]kv.Op{kv.PutOp([]byte("k"), []byte("v")), kv.AddOp([]byte("k"), 1)})
	if err == nil || !strings.Contains(err.Error(), "operation 2 commits nothing") {
		t.Errorf("an add to a value that is not an integer: %v", err)
	}
}
