package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/bench/internal/pagecache"

	"github.com/kvstore/kv/bench/engine"
)

// fakeEngine is a map with a bug switch, to show that the workloads'
// checks catch what they claim to.
type fakeEngine struct {
	m   map[string][]byte
	bug string
}

func (f *fakeEngine) Put(k, v []byte) error {
	if _, ok := f.m[string(k)]; ok && f.bug == "lost-put" && k[0]&1 == 0 {
		return nil // an overwrite of half the keys is lost
	}
	f.m[string(k)] = bytes.Clone(v)
	return nil
}

func (f *fakeEngine) PutBatch(ks, vs [][]byte) error {
	for i := range ks {
		f.Put(ks[i], vs[i])
	}
	return nil
}

func (f *fakeEngine) Get(k []byte, fn func([]byte)) error {
	v, ok := f.m[string(k)]
	if !ok {
		return engine.ErrNotFound
	}
	if f.bug == "corrupt" {
		v = bytes.Clone(v)
		v[len(v)-1] ^= 1
	}
	fn(v)
	return nil
}

func (f *fakeEngine) Scan(fn func(k, v []byte) bool) error {
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	switch f.bug {
	case "unordered":
		keys[0], keys[1] = keys[1], keys[0]
	case "short-scan":
		keys = keys[1:]
	}
	for _, k := range keys {
		if !fn([]byte(k), f.m[k]) {
			break
		}
	}
	return nil
}

func (f *fakeEngine) Add([]byte, int64) (int64, error) { return 0, engine.ErrUnsupported }
func (f *fakeEngine) Sync() error                      { return nil }
func (f *fakeEngine) Close() error                     { return nil }

func TestChecksCatchBugs(t *testing.T) {
	const n = 100
	for _, tc := range []struct {
		bug     string
		wantErr string // "" for none
	}{
		{"", ""},
		{"corrupt", "damaged"},
		{"unordered", "out of order"},
		{"short-scan", "found 99 keys"},
		{"lost-put", "generation"},
	} {
		t.Run("bug="+tc.bug, func(t *testing.T) {
			e := &fakeEngine{m: map[string][]byte{}, bug: tc.bug}
			k, v := make([]byte, keySize), make([]byte, valueSize)
			for i := range n {
				dataset.Key(k, i)
				e.Put(k, dataset.Value(v, k, 0))
			}
			for i := range n {
				dataset.Key(k, i)
				e.Put(k, dataset.Value(v, k, 1))
			}
			var err error
			for i := 0; i < n && err == nil; i++ {
				err = expectGen(e, dataset.Key(k, i), 1)
			}
			if err == nil {
				err = checkScan(e, n)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("correct engine failed a check: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("bug %s not caught", tc.bug)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("bug %s caught as %q, want it to mention %q", tc.bug, err, tc.wantErr)
			}
		})
	}
}

func TestValue(t *testing.T) {
	k, v := make([]byte, keySize), make([]byte, valueSize)
	dataset.Key(k, 42)
	if gen, err := dataset.Check(k, dataset.Value(v, k, 7)); err != nil || gen != 7 {
		t.Fatalf("dataset.Check(dataset.Value(gen 7)) = %d, %v", gen, err)
	}
	other := dataset.Key(make([]byte, keySize), 43)
	if _, err := dataset.Check(other, v); err == nil {
		t.Fatal("another key's value passed")
	}
	if _, err := dataset.Check(k, v[:99]); err == nil {
		t.Fatal("a short value passed")
	}
}

func TestDataKeysDistinct(t *testing.T) {
	seen := map[string]bool{}
	k := make([]byte, keySize)
	for i := range 100_000 {
		s := string(dataset.Key(k, i))
		if seen[s] {
			t.Fatalf("key %d repeats", i)
		}
		seen[s] = true
	}
}

func TestKVLogBytesPerPut(t *testing.T) {
	// 24-byte WAL header; kind, revision, key and value with their lengths.
	if got, want := kvLogBytesPerPut(), 24+1+8+4+keySize+4+valueSize; got != want {
		t.Fatalf("kvLogBytesPerPut() = %d, want %d", got, want)
	}
}

// TestReportRatios checks the ratio table on made-up figures: kv's figure
// over each engine's in the same round, the median and range of those.
func TestReportRatios(t *testing.T) {
	c := config{Keys: 1_000_000, Batch: 1000, ReadDur: 3e9, Rounds: 2, Writers: []int{1}, Cold: pagecache.Drop}
	res := results{}
	for round, v := range []struct{ kv, walmap, pebble float64 }{{200, 100, 50}, {300, 100, 100}} {
		res.add("kv", "get1.warm.ops", round, v.kv)
		res.add("walmap", "get1.warm.ops", round, v.walmap)
		res.add("pebble", "get1.warm.ops", round, v.pebble)
	}
	var b strings.Builder
	report(&b, saved{Config: c, Engines: []string{"kv", "pebble", "walmap"}, Results: res, Load: []float64{1, 2, 3}})
	out := b.String()
	for _, want := range []string{
		"| row | workload | kv ÷ pebble | kv ÷ walmap |",
		"| get1.warm.ops | random Get on 1M keys, 1 goroutine, warm (after a full scan) ↑ | 3.50× (3.00×–4.00×) | 2.50× (2.00×–3.00×) |",
		"| get1.warm.ops | random Get on 1M keys, 1 goroutine, warm (after a full scan) ↑ | 250 (200–300) | 75 (50–100) | 100 |",
		"drop_caches",
		"median 2.0 (1.0–3.0)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q:\n%s", want, out)
		}
	}
}

func TestKillGen(t *testing.T) {
	const keys = 10
	for _, tc := range []struct {
		name    string
		j, n    int
		wantGen uint64
	}{
		{"untouched key", 7, 5, 0},
		{"last tail put", 4, 5, 1},
		{"first tail put", 0, 5, 1},
		{"second pass", 2, 13, 2},
		{"first pass only", 3, 13, 1},
		{"exactly one pass", 9, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := killGen(tc.j, tc.n, keys); got != tc.wantGen {
				t.Fatalf("killGen(%d, %d, %d) = %d, want %d", tc.j, tc.n, keys, got, tc.wantGen)
			}
		})
	}
}

func TestNewestLog(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"000004.log", "000012-001.log", "000009.sst", "MANIFEST-000013", "00003.mem"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ext  string
		want int64
	}{{".log", 12}, {".mem", 3}} {
		if got, err := newestLog(dir, tc.ext); err != nil || got != tc.want {
			t.Errorf("newestLog(%s) = %d, %v, want %d", tc.ext, got, err, tc.want)
		}
	}
	if _, err := newestLog(dir, ".wal"); err == nil {
		t.Error("newestLog found a .wal file in a directory with none")
	}
}
