package record_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kvstore/kv/record"
)

// specItem is one key's item of the content hash, built field by field
// from FORMAT.md ("Content hash"), not with the package's code.
func specItem(b []byte, create, mod, version uint64, key, value string) []byte {
	b = binary.LittleEndian.AppendUint64(b, create)
	b = binary.LittleEndian.AppendUint64(b, mod)
	b = binary.LittleEndian.AppendUint64(b, version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// TestHashFormatExample: the two hashes FORMAT.md gives as examples are
// the SHA-256 of the bytes its table describes, what Map.Hash gives for
// those maps, and are printed in FORMAT.md as they are.
func TestHashFormatExample(t *testing.T) {
	format, err := os.ReadFile("../FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	// put a 1, put b x, put a 2.
	m := record.NewMap()
	for _, r := range []record.Record{put(1, "a", "1"), put(2, "b", "x"), put(3, "a", "2")} {
		if err := m.Apply(&r); err != nil {
			t.Fatal(err)
		}
	}
	spec := specItem(nil, 1, 3, 2, "a", "2")
	spec = specItem(spec, 2, 2, 1, "b", "x")
	for _, tc := range []struct {
		name string
		m    *record.Map
		spec []byte
	}{
		{"the empty map", record.NewMap(), nil},
		{"put a 1, put b x, put a 2", m, spec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := record.Hash(sha256.Sum256(tc.spec))
			if got := tc.m.Hash(); got != want {
				t.Errorf("Map.Hash = %s, want %s (SHA-256 of the items FORMAT.md describes)", got, want)
			}
			if !strings.Contains(string(format), "`"+want.String()+"`") {
				t.Errorf("FORMAT.md does not give %s as the hash of %s", want, tc.name)
			}
		})
	}
}

// TestHashFields: every field of every entry is in the hash, and so is
// which key each belongs to; how the map was built is not.
func TestHashFields(t *testing.T) {
	type ent struct {
		k, v              string
		create, mod, vers uint64
	}
	base := []ent{{"a", "1", 1, 3, 2}, {"bc", "", 2, 2, 1}, {"d", "xyz", 4, 5, 2}}
	build := func(es []ent) record.Hash {
		m := record.NewMap()
		for _, e := range es {
			m.Load(&record.Entry{Key: []byte(e.k), Value: []byte(e.v), CreateRev: record.Revision(e.create),
				ModRev: record.Revision(e.mod), Version: int64(e.vers)})
		}
		return m.Hash()
	}
	want := build(base)
	// The same entries loaded in another order.
	if got := build([]ent{base[2], base[0], base[1]}); got != want {
		t.Errorf("the same map loaded in another order hashes to %s, want %s", got, want)
	}
	changes := map[string]func(es []ent){
		"value":           func(es []ent) { es[1].v = "x" },
		"create revision": func(es []ent) { es[2].create = 3 },
		"mod revision":    func(es []ent) { es[0].mod = 4 },
		"version":         func(es []ent) { es[2].vers = 3 },
		"key":             func(es []ent) { es[2].k = "e" },
		// Bytes moved from a key to its value: the lengths tell them apart.
		"key/value split": func(es []ent) { es[1].k, es[1].v = "b", "c" },
		"key added":       func(es []ent) {},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			es := append([]ent(nil), base...)
			change(es)
			if name == "key added" {
				es = append(es, ent{"e", "", 6, 6, 1})
			}
			if got := build(es); got == want {
				t.Errorf("changing the %s left the hash at %s", name, got)
			}
		})
	}
}

// TestHashLarge: a map whose items pass the hasher's buffer, a value
// bigger than it among them, hashes as the spec's bytes do.
func TestHashLarge(t *testing.T) {
	m := record.NewMap()
	var spec []byte
	for i := range 3000 {
		k := fmt.Sprintf("k%05d", i)
		v := strings.Repeat("v", i%50)
		if i == 1500 {
			v = strings.Repeat("big", 50_000)
		}
		m.Load(&record.Entry{Key: []byte(k), Value: []byte(v), CreateRev: 1, ModRev: record.Revision(i + 1), Version: 1})
		spec = specItem(spec, 1, uint64(i+1), 1, k, v)
	}
	if got, want := m.Hash(), record.Hash(sha256.Sum256(spec)); got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}
