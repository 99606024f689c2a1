package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// contents reads every pair back with Scan, checking the order.
func contents(t testing.TB, e Engine) map[string]string {
	t.Helper()
	m := map[string]string{}
	var prev []byte
	err := e.Scan(func(k, v []byte) bool {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			t.Fatalf("scan out of order: %q after %q", k, prev)
		}
		prev = slices.Clone(k)
		m[string(k)] = string(v)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		var got []byte
		if err := e.Get([]byte(k), func(b []byte) { got = slices.Clone(b) }); err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		if string(got) != v {
			t.Fatalf("get %q = %q, scan said %q", k, got, v)
		}
	}
	return m
}

// TestEngines runs every engine but raw through the operations kvbench
// uses, closes it, reopens it, and checks that it holds the same pairs.
func TestEngines(t *testing.T) {
	for _, name := range Names {
		if name == "raw" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			e, err := Open(name, dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for i := range 50 {
				k, v := fmt.Sprintf("k%03d", (i*37)%50), fmt.Sprintf("v%d", i)
				if err := e.Put([]byte(k), []byte(v)); err != nil {
					t.Fatal(err)
				}
				want[k] = v
			}
			var ks, vs [][]byte
			for i := range 100 {
				k, v := fmt.Sprintf("b%03d", i), fmt.Sprintf("w%d", i)
				ks, vs = append(ks, []byte(k)), append(vs, []byte(v))
				want[k] = v
			}
			if err := e.PutBatch(ks, vs); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				n, err := e.Add([]byte("counter"), 2)
				if err != nil || n != int64(2*(i+1)) {
					t.Fatalf("Add = %d, %v; want %d", n, err, 2*(i+1))
				}
			}
			want["counter"] = "10"
			if err := e.Get([]byte("missing"), func([]byte) {}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
			}
			if got := contents(t, e); !maps(got, want) {
				t.Fatalf("before reopen: %d pairs, want %d", len(got), len(want))
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e, err = Open(name, dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := contents(t, e); !maps(got, want) {
				t.Fatalf("after reopen: %d pairs, want %d: %v", len(got), len(want), got)
			}
		})
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestWALMapTail checks that the adapter's mirror of tidwall/wal's segment
// rotation names the file tidwall/wal appends to, after every write, across
// many rotations and a reopen: that is the file it fdatasyncs.
func TestWALMapTail(t *testing.T) {
	dir := t.TempDir()
	const seg = 1000
	e, err := openWALMapSize(dir, Options{}, seg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		segs, err := walSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%020d", segs[len(segs)-1])
		if got := e.TailSegment(); got != want {
			t.Fatalf("%s: the adapter syncs %s, tidwall/wal appends to %s", step, got, want)
		}
	}
	v := bytes.Repeat([]byte("x"), 90)
	for i := range 200 {
		var err error
		if i%7 == 6 { // a batch of several pairs, one entry
			err = e.PutBatch([][]byte{[]byte("a"), []byte("b"), []byte("c")}, [][]byte{v, v, v})
		} else {
			err = e.Put(fmt.Appendf(nil, "k%d", i%13), v[:i%91])
		}
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("write %d", i))
		if i == 100 {
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if e, err = openWALMapSize(dir, Options{}, seg); err != nil {
				t.Fatal(err)
			}
			check("reopen")
		}
	}
	segs, _ := walSegments(dir)
	if len(segs) < 10 {
		t.Fatalf("%d segments: the test did not rotate enough", len(segs))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// The log replays without the adapter: every entry decodes.
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%020d", segs[0]))); err != nil {
		t.Fatal(err)
	}
	e, err = openWALMapSize(dir, Options{}, seg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := len(contents(t, e)); got != 16 {
		t.Fatalf("%d keys after replay, want 16 (k0..k12, a, b, c)", got)
	}
}

func TestDecodePairs(t *testing.T) {
	b := appendPairs(nil, [][]byte{[]byte("k"), {}}, [][]byte{[]byte("v1"), []byte("v2")})
	var got []string
	if err := decodePairs(b, func(k, v []byte) { got = append(got, string(k)+"="+string(v)) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"k=v1", "=v2"}; !slices.Equal(got, want) {
		t.Fatalf("decoded %q, want %q", got, want)
	}
	for n := range len(b) {
		if err := decodePairs(b[:n], func(k, v []byte) {}); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte entry decoded", n, len(b))
		}
	}
}
