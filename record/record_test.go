package record_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kvstore/kv/record"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func put(rev record.Revision, k, v string) record.Record {
	return record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindPut, Key: []byte(k), Value: []byte(v)}}}
}

func del(rev record.Revision, k string) record.Record {
	return record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindDelete, Key: []byte(k)}}}
}

func add(rev record.Revision, k string, delta int64) record.Record {
	return record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindAdd, Key: []byte(k), Delta: delta}}}
}

func txn(rev record.Revision, ops ...record.Op) record.Record {
	return record.Record{Revision: rev, Txn: true, Succeeded: true, Ops: ops}
}

func opPut(k, v string) record.Op {
	return record.Op{Kind: record.KindPut, Key: []byte(k), Value: []byte(v)}
}
func opDel(k string) record.Op { return record.Op{Kind: record.KindDelete, Key: []byte(k)} }
func opAdd(k string, d int64) record.Op {
	return record.Op{Kind: record.KindAdd, Key: []byte(k), Delta: d}
}

// roundTripCases are records of every shape; their encodings also seed
// FuzzDecode through testdata/.
func roundTripCases() []struct {
	name string
	rec  record.Record
} {
	var compares []record.Compare
	for _, target := range []record.Target{record.TargetValue, record.TargetCreateRev, record.TargetModRev, record.TargetVersion, record.TargetExists} {
		for _, rel := range []record.Cmp{record.CmpEqual, record.CmpNotEqual, record.CmpLess, record.CmpGreater} {
			c := record.Compare{Key: []byte("k"), Target: target, Cmp: rel}
			if target == record.TargetValue {
				c.Value = []byte("v")
			} else {
				c.Num = int64(target)*10 + int64(rel)
			}
			compares = append(compares, c)
		}
	}
	return []struct {
		name string
		rec  record.Record
	}{
		{"put", put(1, "key", "value")},
		{"put empty key and value", put(2, "", "")},
		{"put binary", put(3, "\x00\xff", "\x00\x01\x02")},
		{"put big revision", put(record.MaxRevision, "k", "v")},
		{"del", del(4, "key")},
		{"del empty key", del(5, "")},
		{"add", add(6, "n", 1)},
		{"add negative delta", add(7, "n", -42)},
		{"add big delta", add(8, "n", math.MaxInt64)},
		{"add min delta", add(9, "n", math.MinInt64)},
		{"txn empty", record.Record{Revision: 10, Txn: true}},
		{"skip", record.Record{Revision: 1 << 40, Skip: true}},
		{"txn failed branch", record.Record{Revision: 11, Txn: true, Succeeded: false, Ops: []record.Op{opPut("else", "x")}}},
		{"txn one op", txn(12, opPut("a", "1"))},
		{"txn every op kind", txn(13, opPut("a", "1"), opDel("b"), opAdd("c", -3), opPut("", ""))},
		{"txn every compare", record.Record{Revision: 14, Txn: true, Succeeded: true, Compares: compares,
			Ops: []record.Op{opAdd("k", 1)}}},
		{"txn compare with empty key and value", record.Record{Revision: 15, Txn: true,
			Compares: []record.Compare{{Target: record.TargetValue, Cmp: record.CmpEqual}, {Target: record.TargetExists, Cmp: record.CmpEqual, Num: 0}}}},
		{"txn negative compare number", record.Record{Revision: 16, Txn: true, Succeeded: true,
			Compares: []record.Compare{{Key: []byte("x"), Target: record.TargetVersion, Cmp: record.CmpLess, Num: math.MinInt64}}}},
		{"put on a lease", record.Record{Revision: 17, Ops: []record.Op{opPut("k", "v").WithLease(5)}}},
		{"txn put on a lease", txn(18, opPut("a", "1").WithLease(math.MaxUint64), opAdd("b", 1), opPut("c", ""))},
		{"lease grant", record.Record{Revision: 19, Lease: record.LeaseChange{Action: record.LeaseGrant, ID: 19,
			TTL: 30e9, Deadline: 1767225600e9}}},
		{"lease keep-alive", record.Record{Revision: 20, Lease: record.LeaseChange{Action: record.LeaseKeepAlive, ID: 19,
			Deadline: math.MaxInt64}}},
		{"lease revoke", record.Record{Revision: 21, Lease: record.LeaseChange{Action: record.LeaseRevoke, ID: 19},
			Ops: []record.Op{opDel(""), opDel("a"), opDel("b")}}},
		{"lease expire", record.Record{Revision: 22, Lease: record.LeaseChange{Action: record.LeaseExpire, ID: 1},
			Ops: []record.Op{opDel("k")}}},
		{"lease expire no keys", record.Record{Revision: 23, Lease: record.LeaseChange{Action: record.LeaseExpire, ID: 3}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range roundTripCases() {
		t.Run(tt.name, func(t *testing.T) {
			p := record.Append(nil, &tt.rec)
			got, err := record.Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rec, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode(Append(r)) (-want +got):\n%s", diff)
			}
			// Append appends: a prefix in buf is kept.
			buf := record.Append([]byte("prefix"), &tt.rec)
			if !bytes.Equal(buf, append([]byte("prefix"), p...)) {
				t.Error("Append into a non-empty buffer disagrees with Append(nil)")
			}
			// Decoded slices alias p but are capped: appending to one
			// must not write into the payload.
			for _, op := range got.Ops {
				_ = append(op.Key, "!!!!"...)
				_ = append(op.Value, "!!!!"...)
			}
			if !bytes.Equal(p, record.Append(nil, &tt.rec)) {
				t.Error("appending to a decoded slice changed the payload")
			}
		})
	}
}

// TestSize: Size is the length of Append's encoding for records of every
// shape, including the shapes Append encodes otherwise than their fields
// suggest (a record not marked Txn without exactly one op is encoded as a
// transaction; fields a kind does not use are not encoded).
func TestSize(t *testing.T) {
	tests := append(roundTripCases(), []struct {
		name string
		rec  record.Record
	}{
		{"not txn, no ops", record.Record{Revision: 1}},
		{"not txn, two ops", record.Record{Revision: 2, Ops: []record.Op{opPut("a", "b"), opAdd("c", 1)}}},
		{"not txn, compares and one op", record.Record{Revision: 3,
			Compares: []record.Compare{{Key: []byte("k"), Target: record.TargetExists}}, Ops: []record.Op{opDel("a")}}},
		{"delete with a value", record.Record{Revision: 4, Ops: []record.Op{{Kind: record.KindDelete, Key: []byte("k"), Value: []byte("ignored")}}}},
		{"add with a value", record.Record{Revision: 5, Ops: []record.Op{{Kind: record.KindAdd, Key: []byte("k"), Value: []byte("ignored"), Delta: 3}}}},
		{"txn delete and add with values", txn(6,
			record.Op{Kind: record.KindDelete, Key: []byte("k"), Value: []byte("x")},
			record.Op{Kind: record.KindAdd, Key: []byte("n"), Value: []byte("yy"), Delta: -1})},
		{"numeric compare with a value", record.Record{Revision: 7, Txn: true, Compares: []record.Compare{
			{Key: []byte("k"), Target: record.TargetModRev, Cmp: record.CmpLess, Value: []byte("ignored"), Num: 3}}}},
		{"skip with ops", record.Record{Revision: 8, Skip: true, Ops: []record.Op{opPut("a", "b")}}},
		{"txn of a 1 MiB value", txn(9, opPut("big", string(make([]byte, 1<<20))))},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, got := len(record.Append(nil, &tt.rec)), record.Size(&tt.rec)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Size (-len(Append) +Size):\n%s", diff)
			}
		})
	}
}

// TestAppendLayout builds encodings by hand from the layout in the
// package doc, field by field, so that the format cannot drift unseen.
func TestAppendLayout(t *testing.T) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		rec  record.Record
		want []byte
	}{
		{
			name: "put",
			rec:  put(0x0102, "ab", "xyz"),
			want: cat([]byte{1}, le64(0x0102), le32(2), []byte("ab"), le32(3), []byte("xyz")),
		},
		{
			name: "del",
			rec:  del(7, "ab"),
			want: cat([]byte{2}, le64(7), le32(2), []byte("ab")),
		},
		{
			name: "add",
			rec:  add(8, "n", -2),
			want: cat([]byte{3}, le64(8), le32(1), []byte("n"), le64(uint64(math.MaxUint64-1))),
		},
		{
			name: "txn",
			rec: record.Record{Revision: 9, Txn: true, Succeeded: true,
				Compares: []record.Compare{
					{Key: []byte("k"), Target: record.TargetValue, Cmp: record.CmpNotEqual, Value: []byte("v")},
					{Key: []byte("m"), Target: record.TargetModRev, Cmp: record.CmpGreater, Num: 5},
				},
				Ops: []record.Op{opPut("a", "b"), opDel("c"), opAdd("d", 1)},
			},
			want: cat([]byte{4}, le64(9), []byte{1},
				le32(2),
				[]byte{1, 2}, le32(1), []byte("k"), le32(1), []byte("v"),
				[]byte{3, 4}, le32(1), []byte("m"), le64(5),
				le32(3),
				[]byte{1}, le32(1), []byte("a"), le32(1), []byte("b"),
				[]byte{2}, le32(1), []byte("c"),
				[]byte{3}, le32(1), []byte("d"), le64(1)),
		},
		{
			name: "txn failed branch",
			rec:  record.Record{Revision: 10, Txn: true},
			want: cat([]byte{4}, le64(10), []byte{0}, le32(0), le32(0)),
		},
		{
			name: "skip",
			rec:  record.Record{Revision: 0x0a0b0c, Skip: true},
			want: cat([]byte{5}, le64(0x0a0b0c)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := record.Append(nil, &tt.rec)
			if !bytes.Equal(tt.want, got) {
				t.Errorf("Append (-want +got):\n%s", cmp.Diff(hex.Dump(tt.want), hex.Dump(got)))
			}
			dec, err := record.Decode(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rec, dec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode of the hand-built bytes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeTruncated(t *testing.T) {
	for _, tt := range roundTripCases() {
		t.Run(tt.name, func(t *testing.T) {
			p := record.Append(nil, &tt.rec)
			for n := range len(p) {
				if _, err := record.Decode(p[:n]); !errors.Is(err, record.ErrCorrupt) {
					t.Errorf("Decode of the first %d of %d bytes: %v, want ErrCorrupt", n, len(p), err)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := func(r record.Record) []byte { return record.Append(nil, &r) }
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	rev1 := binary.LittleEndian.AppendUint64(nil, 1)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// txnHead is a transaction's kind, revision 1 and flags.
	txnHead := cat([]byte{4}, rev1, []byte{1})
	tests := []struct {
		name string
		p    []byte
	}{
		{"empty", nil},
		{"kind 0", cat([]byte{0}, rev1, le32(0))},
		{"kind 5", cat([]byte{5}, rev1, le32(0))},
		{"kind 255", cat([]byte{255}, rev1, le32(0))},
		{"trailing byte after put", append(valid(put(1, "k", "v")), 0)},
		{"trailing bytes after del", append(valid(del(1, "k")), 1, 2, 3)},
		{"trailing bytes after txn", append(valid(txn(1, opPut("a", "b"))), 0)},
		{"revision 0 put", valid(put(0, "k", "v"))},
		{"revision 0 txn", valid(record.Record{Txn: true})},
		{"revision past MaxRevision", valid(put(record.MaxRevision+1, "k", "v"))},
		{"revision 2^64-1 del", valid(del(math.MaxUint64, "k"))},
		{"revision 2^64-1 txn", valid(txn(math.MaxUint64, opPut("a", "b")))},
		{"unknown txn flags", cat([]byte{4}, rev1, []byte{2}, le32(0), le32(0))},
		{"compare target 0", cat(txnHead, le32(1), []byte{0, 1}, le32(0), make([]byte, 8), le32(0))},
		{"compare target 6", cat(txnHead, le32(1), []byte{6, 1}, le32(0), make([]byte, 8), le32(0))},
		{"compare relation 0", cat(txnHead, le32(1), []byte{2, 0}, le32(0), make([]byte, 8), le32(0))},
		{"compare relation 5", cat(txnHead, le32(1), []byte{2, 5}, le32(0), make([]byte, 8), le32(0))},
		{"txn op kind 0", cat(txnHead, le32(0), le32(1), []byte{0}, le32(0))},
		{"txn op kind txn", cat(txnHead, le32(0), le32(1), []byte{4}, le32(0))},
		{"txn op kind 9", cat(txnHead, le32(0), le32(1), []byte{9}, le32(0))},
		{"key length past the end", cat([]byte{2}, rev1, le32(5), []byte("abcd"))},
		{"key length 2^32-1", cat([]byte{2}, rev1, le32(math.MaxUint32), []byte("abcd"))},
		{"key length 2^31", cat([]byte{2}, rev1, le32(1<<31), []byte("abcd"))},
		{"value length past the end", cat([]byte{1}, rev1, le32(1), []byte("k"), le32(2), []byte("v"))},
		{"compare count past the end", cat(txnHead, le32(2), []byte{5, 1}, le32(0), make([]byte, 8), le32(0))},
		{"op count past the end", cat(txnHead, le32(0), le32(2), []byte{2}, le32(0))},
		{"huge compare count", cat(txnHead, le32(math.MaxUint32), le32(0), le32(0))},
		{"huge op count", cat(txnHead, le32(0), le32(math.MaxUint32), []byte{0, 0})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := record.Decode(tt.p)
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("Decode: %v (%+v), want ErrCorrupt", err, r)
			}
			if diff := cmp.Diff(record.Record{}, r); diff != "" {
				t.Errorf("Decode returned a record with its error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeMaxRevision checks that the largest revision decodes: a
// store may hold it.
func TestDecodeMaxRevision(t *testing.T) {
	for _, r := range []record.Record{put(record.MaxRevision, "k", "v"), txn(record.MaxRevision, opPut("a", "b"))} {
		got, err := record.Decode(record.Append(nil, &r))
		if err != nil {
			t.Fatalf("Decode of a record at MaxRevision: %v", err)
		}
		if got.Revision != record.MaxRevision {
			t.Errorf("revision %d, want %d", got.Revision, record.MaxRevision)
		}
	}
}

// TestDecodeHugeCountsDoNotAllocate checks that a count or length claiming
// more elements than the payload can hold fails before allocating for them.
func TestDecodeHugeCountsDoNotAllocate(t *testing.T) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	head := append([]byte{4}, binary.LittleEndian.AppendUint64(nil, 1)...)
	head = append(head, 1)
	tests := []struct {
		name string
		p    []byte
	}{
		{"2^32-1 ops", append(append(append(head, le32(0)...), le32(math.MaxUint32)...), 0, 0)},
		{"2^32-1 compares", append(append(append(head, le32(math.MaxUint32)...), le32(0)...), 0, 0)},
		{"2^31 ops", append(append(append(head, le32(0)...), le32(1<<31)...), 0, 0)},
		{"one op in two bytes", append(append(append(head, le32(0)...), le32(1)...), 0, 0)},
		// Counts that fit the bytes left at one byte per element, but not
		// at the smallest encoded size: decoded elements are several
		// times bigger than that, so allocating first would multiply the
		// payload's size.
		{"as many ops as bytes left", append(append(append(head, le32(0)...), le32(64<<10)...), make([]byte, 64<<10)...)},
		{"as many compares as bytes left", append(append(head, le32(64<<10)...), make([]byte, 64<<10)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			allocs := testing.AllocsPerRun(100, func() { _, err = record.Decode(tt.p) })
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("Decode: %v, want ErrCorrupt", err)
			}
			if allocs > 8 {
				t.Errorf("Decode of a %d-byte payload made %v allocations", len(tt.p), allocs)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			for range 10 {
				record.Decode(tt.p)
			}
			runtime.ReadMemStats(&ms)
			if perCall := (ms.TotalAlloc - before) / 10; perCall > 4<<10 {
				t.Errorf("Decode of a %d-byte payload allocated %d bytes", len(tt.p), perCall)
			}
		})
	}
}

const goldenDir = "testdata/records"

// TestEncodingGolden keeps the encoding of every round-trip case in
// testdata/records (run with -update to rewrite them). The files seed
// FuzzDecode.
func TestEncodingGolden(t *testing.T) {
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range roundTripCases() {
		t.Run(tt.name, func(t *testing.T) {
			got := record.Append(nil, &tt.rec)
			name := filepath.Join(goldenDir, goldenName(tt.name))
			if *update {
				if err := os.WriteFile(name, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("encoding differs from %s (-want +got):\n%s", name, cmp.Diff(hex.Dump(want), hex.Dump(got)))
			}
		})
	}
}

func goldenName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == ' ' {
			b[i] = '-'
		}
	}
	return string(b) + ".bin"
}

// FuzzDecode is seeded from the encodings in testdata/records.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.bin"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s: %v", goldenDir, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{4, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0})
	// Records with every kind of compare and op, decoded into the record
	// that DecodeInto then reuses.
	var dirty [][]byte
	for _, name := range []string{"txn-every-op-kind.bin", "txn-every-compare.bin"} {
		b, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			f.Fatal(err)
		}
		dirty = append(dirty, b)
	}

	f.Fuzz(func(t *testing.T, p []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		r, err := record.Decode(p)
		runtime.ReadMemStats(&ms)
		// Each compare takes at least 10 bytes of payload and each op 5;
		// decoded, they take under 100 bytes each.
		if alloc := ms.TotalAlloc - before; alloc > 20*uint64(len(p))+64<<10 {
			t.Errorf("Decode of %d bytes allocated %d bytes", len(p), alloc)
		}
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("Decode: %v, want ErrCorrupt", err)
			}
			return
		}
		if r.Revision == 0 || r.Revision > record.MaxRevision {
			t.Fatalf("Decode accepted revision %d", r.Revision)
		}
		enc := record.Append(nil, &r)
		if n := record.Size(&r); n != len(p) {
			t.Fatalf("Size %d, encoding %d bytes", n, len(p))
		}
		if !bytes.Equal(p, enc) {
			t.Fatalf("Append(Decode(p)) != p:\n%s", cmp.Diff(hex.Dump(p), hex.Dump(enc)))
		}
		r2, err := record.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Append(Decode(p))): %v", err)
		}
		if diff := cmp.Diff(r, r2); diff != "" {
			t.Fatalf("Decode(Append(Decode(p))) (-want +got):\n%s", diff)
		}
		if enc2 := record.Append(nil, &r2); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
		// DecodeInto a record that held others, as a replay's does,
		// gives what Decode gives: nothing left over from those.
		var reused record.Record
		for _, seed := range dirty {
			if err := record.DecodeInto(seed, &reused); err != nil {
				t.Fatal(err)
			}
		}
		if err := record.DecodeInto(p, &reused); err != nil {
			t.Fatalf("DecodeInto into a used record: %v; Decode succeeded", err)
		}
		if diff := cmp.Diff(r, reused, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("DecodeInto into a used record (-Decode +DecodeInto):\n%s", diff)
		}

		// The lease table judges any decoded record without a panic, and
		// a record it refuses changes nothing.
		lt := record.NewLeases()
		if err := lt.Apply(&r); err != nil {
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("Leases.Apply: %v, want ErrCorrupt", err)
			}
			if lt.Len() != 0 || lt.Bound() != 0 {
				t.Fatalf("a refused Leases.Apply changed the table: %d leases, %d keys", lt.Len(), lt.Bound())
			}
		}

		// Apply to an empty map: no panic, and all or nothing.
		m := record.NewMap()
		if err := m.Apply(&r); err != nil {
			if !errors.Is(err, record.ErrNotInteger) && !errors.Is(err, record.ErrOverflow) {
				t.Fatalf("Apply: %v, want ErrNotInteger or ErrOverflow", err)
			}
			if m.Len() != 0 || m.Revision() != 0 || m.Bytes() != 0 {
				t.Fatalf("a failed Apply changed the map: %d keys, revision %d", m.Len(), m.Revision())
			}
			return
		}
		if m.Revision() != r.Revision {
			t.Fatalf("revision %d after Apply, want %d", m.Revision(), r.Revision)
		}
		var size int64
		for e := range m.All(nil, nil) {
			size += int64(len(e.Key) + len(e.Value))
			if e.CreateRev != r.Revision || e.ModRev != r.Revision || e.Version < 1 {
				t.Fatalf("entry %q: CreateRev %d ModRev %d Version %d", e.Key, e.CreateRev, e.ModRev, e.Version)
			}
		}
		if size != m.Bytes() {
			t.Fatalf("Bytes() = %d, keys and values hold %d", m.Bytes(), size)
		}
	})
}
