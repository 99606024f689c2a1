package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// expectCut returns what Scan(newest=true) must return for file cut to
// its first cut bytes, given the records of the whole file: the records
// that end at or before the cut, and the end of the last of them (0 when
// even the header record is cut).
func expectCut(all []scanned, cut int) ([]scanned, int64) {
	if cut < segHeaderRec {
		return nil, 0
	}
	var recs []scanned
	end := int64(segHeaderRec)
	for _, r := range all {
		e := r.Offset + recHeaderSize + int64(len(r.Payload))
		if e > int64(cut) {
			break
		}
		recs, end = append(recs, r), e
	}
	return recs, end
}

func TestScanTornTail(t *testing.T) {
	type cutCase struct {
		name string
		file []byte // the whole segment, sealed
		all  []scanned
		cut  int
	}
	var cases []cutCase

	// Ten records of varied sizes, each synced before the next was
	// written, then sealed: cut inside each of the last three data records
	// and the seal, at every byte, boundaries included.
	fsys := newFS(t)
	ps := payloads(10)
	offs := writeSynced(t, fsys, 1, ps, wal.Options{}, true)
	full := readSegment(t, fsys, 1)
	all := recordsFor(1, ps)
	if got, _, err := scanSegment(fsys, 1, false); err != nil || !cmp.Equal(all, got) {
		t.Fatalf("the intact segment does not scan as sealed: %v", err)
	}
	for cut := int(offs[len(offs)-3]); cut < len(full); cut++ {
		rec := "seal"
		for i := len(offs) - 1; i >= 0; i-- {
			if int64(cut) >= offs[i] {
				if int64(cut) < all[i].Offset+recHeaderSize+int64(len(all[i].Payload)) {
					rec = fmt.Sprintf("record%d", i)
				}
				break
			}
		}
		cases = append(cases, cutCase{name: fmt.Sprintf("10 records/cut %d in %s", cut, rec), file: full, all: all, cut: cut})
	}
	for _, cut := range []int{0, 1, segHeaderRec - 1, segHeaderRec, segHeaderRec + 1, int(offs[5]), int(offs[5]) + 3} {
		cases = append(cases, cutCase{name: fmt.Sprintf("10 records/cut %d", cut), file: full, all: all, cut: cut})
	}

	// A segment holding only its header record (and a seal): cut inside
	// the header at every byte.
	tiny := newFS(t)
	writeSynced(t, tiny, 1, nil, wal.Options{}, true)
	tinyFile := readSegment(t, tiny, 1)
	for cut := 0; cut < len(tinyFile); cut++ {
		cases = append(cases, cutCase{name: fmt.Sprintf("header only/cut %d", cut), file: tinyFile, cut: cut})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.file[:tc.cut]
			fsys := memWithSegment(t, 1, b)
			wantRecs, wantEnd := expectCut(tc.all, tc.cut)
			got, info, err := scanSegment(fsys, 1, true)
			if err != nil {
				t.Fatalf("newest: %v, want a torn tail", err)
			}
			if len(got) != len(wantRecs) || !isPrefix(wantRecs, got) {
				t.Errorf("newest: records (-want +got):\n%s", cmp.Diff(wantRecs, got))
			}
			// Every record was written after the one before it was
			// synced: the last one kept claims its own offset.
			wantSynced := int64(0)
			if n := len(wantRecs); n > 0 {
				wantSynced = wantRecs[n-1].Offset
			}
			wantInfo := wal.SegmentInfo{Segment: 1, Size: int64(tc.cut), End: wantEnd, Records: len(wantRecs),
				Torn: !allZero(b[wantEnd:]), Synced: wantSynced, DataEnd: wantEnd}
			if wantInfo.Torn {
				wantInfo.TornReason = info.TornReason // any reason, but one
				if info.TornReason == "" {
					t.Error("newest: Torn without a TornReason")
				}
			}
			if diff := cmp.Diff(wantInfo, info); diff != "" {
				t.Errorf("newest: SegmentInfo (-want +got):\n%s", diff)
			}

			// The same bytes as a sealed segment: cut short, which a crash
			// cannot do to a segment that has a successor.
			got, _, err = scanSegment(fsys, 1, false)
			if err := checkCorrupt(err, wal.ErrCorrupt, wal.SegmentPath(testDir, 1), wantEnd); err != nil {
				t.Errorf("sealed: %v", err)
			}
			if !isPrefix(wantRecs, got) {
				t.Errorf("sealed: records delivered before the error are not a prefix of the valid ones")
			}
		})
	}
}

// scanWant is what a Scan in one mode must return.
type scanWant struct {
	err     error // sentinel matched with errors.Is; nil for success
	off     int64 // offset named by the error, or End on success
	records int   // on success
	sealed  bool  // on success
	torn    bool  // on success
}

func TestScanCorruption(t *testing.T) {
	// A sealed segment of ten records, each synced before the next was
	// written, so that every record but the first claims the ones before
	// it durable; preallocated, so that zeros follow the seal.
	base := newFS(t)
	ps := payloads(10)
	offs := writeSynced(t, base, 1, ps, wal.Options{Preallocate: 4096}, true)
	orig := readSegment(t, base, 1)
	all := recordsFor(1, ps)
	sealOff := all[9].Offset + recHeaderSize + int64(len(ps[9]))
	sealEnd := sealOff + recHeaderSize
	if len(ps[7]) != 16 {
		t.Fatalf("payload 7 has %d bytes; the second-header case needs 16", len(ps[7]))
	}
	if int64(len(orig)) != 4096 || !allZero(orig[sealEnd:]) {
		t.Fatalf("fixture: %d bytes, want 4096 with zeros after the seal at %d", len(orig), sealOff)
	}
	syncedAt := func(b []byte, off int64) uint64 { return binary.LittleEndian.Uint64(b[off+8:]) }
	salt := saltOf(orig)
	intact := scanWant{off: sealEnd, records: 10, sealed: true}
	corruptAt := func(off int64) scanWant { return scanWant{err: wal.ErrCorrupt, off: off} }

	type row struct {
		name    string
		corrupt func(b []byte)
		newest  scanWant
		sealed  scanWant
	}
	rows := []row{
		{name: "intact", corrupt: func([]byte) {}, newest: intact, sealed: intact},
		{
			name:    "garbage after the seal",
			corrupt: func(b []byte) { b[sealEnd+100] = 0x5a },
			newest:  corruptAt(sealEnd), sealed: corruptAt(sealEnd),
		},
		{
			name:    "valid data record after the seal",
			corrupt: func(b []byte) { copy(b[sealEnd:], frame(typeData, salt, uint64(sealEnd), []byte("late"))) },
			newest:  corruptAt(sealEnd), sealed: corruptAt(sealEnd),
		},
		{
			name:    "record of another segment (another salt)",
			corrupt: func(b []byte) { copy(b[offs[4]:], frame(typeData, salt+1, syncedAt(b, offs[4]), ps[4])) },
			newest:  corruptAt(offs[4]), sealed: corruptAt(offs[4]),
		},
		{
			name: "second header record",
			corrupt: func(b []byte) {
				copy(b[offs[7]:], frame(typeHeader, salt, syncedAt(b, offs[7]), headerPayload("KVWL", 2, 1, salt)[:16]))
			},
			newest: corruptAt(offs[7]), sealed: corruptAt(offs[7]),
		},
		{
			name:    "wrong magic",
			corrupt: func(b []byte) { copy(b[recHeaderSize:], "KVWX"); recrcHeader(b) },
			newest:  corruptAt(0), sealed: corruptAt(0),
		},
		{
			name:    "version 3",
			corrupt: func(b []byte) { binary.LittleEndian.PutUint16(b[recHeaderSize+4:], 3); recrcHeader(b) },
			newest:  scanWant{err: wal.ErrVersion}, sealed: scanWant{err: wal.ErrVersion},
		},
		{
			name:    "version 0",
			corrupt: func(b []byte) { binary.LittleEndian.PutUint16(b[recHeaderSize+4:], 0); recrcHeader(b) },
			newest:  scanWant{err: wal.ErrVersion}, sealed: scanWant{err: wal.ErrVersion},
		},
		{
			name:    "a version 1 segment",
			corrupt: func(b []byte) { copy(b, v1Header(1)); clear(b[40:offs[0]]) },
			newest:  scanWant{err: wal.ErrVersion}, sealed: scanWant{err: wal.ErrVersion},
		},
		{
			name:    "reserved bytes of the segment header set",
			corrupt: func(b []byte) { b[recHeaderSize+6] = 1; recrcHeader(b) },
			newest:  corruptAt(0), sealed: corruptAt(0),
		},
		{
			name:    "segment header claims bytes synced",
			corrupt: func(b []byte) { b[8] = 1; recrcHeader(b) },
			newest:  corruptAt(0), sealed: corruptAt(0),
		},
		{
			name:    "segment header names another segment",
			corrupt: func(b []byte) { binary.LittleEndian.PutUint64(b[recHeaderSize+8:], 2); recrcHeader(b) },
			newest:  corruptAt(0), sealed: corruptAt(0),
		},
		{
			name:    "first record is not a header",
			corrupt: func(b []byte) { copy(b, frame(typeData, salt, 0, headerPayload("KVWL", 2, 1, salt))) },
			newest:  corruptAt(0), sealed: corruptAt(0),
		},
		{
			name: "record claims bytes past its own offset synced",
			corrupt: func(b []byte) {
				binary.LittleEndian.PutUint64(b[offs[3]+8:], uint64(offs[3]+1))
				recrc(b, offs[3], salt)
			},
			newest: corruptAt(offs[3]), sealed: corruptAt(offs[3]),
		},
		{
			name:    "reserved record header bytes set",
			corrupt: func(b []byte) { b[offs[2]+2] = 1; recrc(b, offs[2], salt) },
			newest:  corruptAt(offs[2]), sealed: corruptAt(offs[2]),
		},
		{
			name:    "record type 0",
			corrupt: func(b []byte) { b[offs[5]] = 0; recrc(b, offs[5], salt) },
			newest:  corruptAt(offs[5]), sealed: corruptAt(offs[5]),
		},
		{
			name:    "record type 5",
			corrupt: func(b []byte) { b[offs[5]] = 5; recrc(b, offs[5], salt) },
			newest:  corruptAt(offs[5]), sealed: corruptAt(offs[5]),
		},
		{
			name:    "length past the maximum, checksums broken",
			corrupt: func(b []byte) { binary.LittleEndian.PutUint32(b[offs[1]+4:], wal.DefaultMaxRecordSize+1) },
			newest:  corruptAt(offs[1]), sealed: corruptAt(offs[1]),
		},
		{
			name: "length past the maximum, checksums intact",
			corrupt: func(b []byte) {
				binary.LittleEndian.PutUint32(b[offs[1]+4:], wal.DefaultMaxRecordSize+1)
				binary.LittleEndian.PutUint32(b[offs[1]+16:], saltedCRC(salt, b[offs[1]:offs[1]+16]))
			},
			newest: corruptAt(offs[1]), sealed: corruptAt(offs[1]),
		},
		{
			name:    "length past the end of the file",
			corrupt: func(b []byte) { binary.LittleEndian.PutUint32(b[offs[1]+4:], 1<<20) },
			newest:  corruptAt(offs[1]), sealed: corruptAt(offs[1]),
		},
		{
			name: "seal record with a payload",
			corrupt: func(b []byte) {
				copy(b[offs[9]:], frame(typeSeal, salt, syncedAt(b, offs[9]), make([]byte, len(ps[9]))))
			},
			newest: corruptAt(offs[9]), sealed: corruptAt(offs[9]),
		},
		{
			name: "mark record with a payload",
			corrupt: func(b []byte) {
				copy(b[offs[9]:], frame(typeMark, salt, syncedAt(b, offs[9]), make([]byte, len(ps[9]))))
			},
			newest: corruptAt(offs[9]), sealed: corruptAt(offs[9]),
		},
		{
			// Nothing after the seal proves it was synced, but all its
			// bytes are there, zeros follow, and a crash loses bytes, it
			// does not alter them.
			name:    "seal record altered",
			corrupt: func(b []byte) { b[sealOff+20] ^= 0xff },
			newest:  corruptAt(sealOff), sealed: corruptAt(sealOff),
		},
		{
			name:    "seal record zeroed",
			corrupt: func(b []byte) { clear(b[sealOff:sealEnd]) },
			newest:  scanWant{off: sealOff, records: 10},
			sealed:  corruptAt(sealOff),
		},
		{
			name:    "last data record and seal zeroed",
			corrupt: func(b []byte) { clear(b[offs[9]:sealEnd]) },
			newest:  scanWant{off: offs[9], records: 9},
			sealed:  corruptAt(offs[9]),
		},
	}
	// Every byte of every record but the seal flipped: each has a later
	// record written after it was synced, so it is corruption in both
	// modes, reported at the record's offset.
	starts := append([]int64{0}, offs...)
	for i, start := range starts {
		end := sealOff
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		for pos := start; pos < end; pos++ {
			rows = append(rows, row{
				name:    fmt.Sprintf("flip byte %d of record %d at %d", pos-start, i, start),
				corrupt: func(b []byte) { b[pos] ^= 0xff },
				newest:  corruptAt(start), sealed: corruptAt(start),
			})
		}
	}

	file := wal.SegmentPath(testDir, 1)
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			b := append([]byte(nil), orig...)
			tt.corrupt(b)
			fsys := memWithSegment(t, 1, b)
			for _, mode := range []struct {
				newest bool
				want   scanWant
			}{{true, tt.newest}, {false, tt.sealed}} {
				got, info, err := scanSegment(fsys, 1, mode.newest)
				w := mode.want
				if w.err != nil {
					if err := checkCorrupt(err, w.err, file, w.off); err != nil {
						t.Errorf("newest=%v: %v", mode.newest, err)
					}
					if !isPrefix(all, got) {
						t.Errorf("newest=%v: records delivered before the error are not a prefix of the written ones", mode.newest)
					}
					continue
				}
				if err != nil {
					t.Errorf("newest=%v: %v, want success", mode.newest, err)
					continue
				}
				if len(got) != w.records || !isPrefix(all, got) {
					t.Errorf("newest=%v: records (-want +got):\n%s", mode.newest, cmp.Diff(all[:w.records], got))
				}
				gotW := scanWant{off: info.End, records: info.Records, sealed: info.Sealed, torn: info.Torn}
				if diff := cmp.Diff(w, gotW, cmp.AllowUnexported(scanWant{}), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
					t.Errorf("newest=%v: SegmentInfo (-want +got):\n%s", mode.newest, diff)
				}
			}
			// Scan only reads.
			if got := readSegment(t, fsys, 1); !bytes.Equal(b, got) {
				t.Error("Scan changed the file")
			}
		})
	}
}

// TestScanDamageBeforeLastRecord zeroes a sector inside the last data
// record of a segment whose only later record ends exactly at the end of
// the file: the zeros make the damage look like a crash, so whether that
// later record proves the damage was synced decides.
func TestScanDamageBeforeLastRecord(t *testing.T) {
	ps := append(payloads(4), bytes.Repeat([]byte("z"), 1500))
	tests := []struct {
		name  string
		write func(t *testing.T, fsys *vfs.MemFS) []int64 // returns the data records' offsets
		torn  bool                                        // else corrupt
	}{
		{
			name: "seal written after the damaged record was synced",
			write: func(t *testing.T, fsys *vfs.MemFS) []int64 {
				return writeSynced(t, fsys, 1, ps, wal.Options{}, true)
			},
		},
		{
			name: "empty record written after the damaged record was synced",
			write: func(t *testing.T, fsys *vfs.MemFS) []int64 {
				return writeSynced(t, fsys, 1, append(ps, []byte{}), wal.Options{}, false)[:len(ps)]
			},
		},
		{
			name: "empty record written before any sync",
			write: func(t *testing.T, fsys *vfs.MemFS) []int64 {
				w, err := wal.Create(fsys, testDir, 1, wal.Options{})
				if err != nil {
					t.Fatal(err)
				}
				pos, err := w.Append(append(ps, []byte{})...)
				if err != nil {
					t.Fatal(err)
				}
				// No Close: its sync and the mark after it would prove
				// the records synced.
				return recordOffsets(pos.Offset, ps)
			},
			torn: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newFS(t)
			offs := tt.write(t, fsys)
			b := readSegment(t, fsys, 1)
			last := offs[len(offs)-1]
			sector := (last/wal.SectorSize + 1) * wal.SectorSize
			if sector+wal.SectorSize > last+recHeaderSize+int64(len(ps[len(ps)-1])) {
				t.Fatalf("fixture: no whole sector inside the last record at %d", last)
			}
			clear(b[sector : sector+wal.SectorSize])
			got, info, err := scanSegment(memWithSegment(t, 1, b), 1, true)
			if !tt.torn {
				if err := checkCorrupt(err, wal.ErrCorrupt, wal.SegmentPath(testDir, 1), last); err != nil {
					t.Error(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v, want a torn tail", err)
			}
			if len(got) != len(ps)-1 || !info.Torn || info.End != last {
				t.Errorf("%d records, %+v; want %d records, torn at %d", len(got), info, len(ps)-1, last)
			}
		})
	}
}

// TestScanAlteredNotLost covers damage that no later record proves synced:
// it is a torn tail only in a shape a crash leaves (the file ends inside
// it, or a 512-byte sector's part of it reads as zeros); bytes that are all
// there but wrong are corruption, even in the last record.
func TestScanAlteredNotLost(t *testing.T) {
	// One batch, never synced: every record claims only the header durable.
	ps := append(payloads(5), bytes.Repeat([]byte("y"), 1500), []byte("after"))
	build := func(t *testing.T, prealloc int64) ([]byte, []int64) {
		fsys := newFS(t)
		w, err := wal.Create(fsys, testDir, 1, wal.Options{Preallocate: prealloc})
		if err != nil {
			t.Fatal(err)
		}
		pos, err := w.Append(ps...)
		if err != nil {
			t.Fatal(err)
		}
		// Read before Close, whose sync and mark would prove every
		// record synced.
		b := readSegment(t, fsys, 1)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b, recordOffsets(pos.Offset, ps)
	}
	const big, final = 5, 6 // the 1500-byte record, and the record after it
	// firstSector returns the first sector boundary past the header of the
	// record at off.
	firstSector := func(off int64) int64 { return (off+recHeaderSize)/wal.SectorSize*wal.SectorSize + wal.SectorSize }
	tests := []struct {
		name     string
		prealloc int64
		cutAt    int // record index: cut the file at its end; -1: keep it all
		damage   int // record index
		alter    func(b []byte, off, end int64)
		cut      int64 // then cut this many bytes off the end of the file
		torn     bool  // else corrupt
	}{
		{
			// All its bytes are there, the file ends where the record
			// does: a crash that cut the file would have cut the record.
			name: "byte flipped in the last record, the file ends with it", cutAt: -1, damage: final,
			alter: func(b []byte, off, end int64) { b[end-1] ^= 1 },
		},
		{
			name: "byte flipped in the last record's payload, the file ends with it", cutAt: -1, damage: final,
			alter: func(b []byte, off, end int64) { b[off+recHeaderSize] ^= 1 },
		},
		{
			name: "byte flipped in the last record's header, the file ends with it", cutAt: -1, damage: final,
			alter: func(b []byte, off, end int64) { b[off+4] ^= 1 },
		},
		{
			name: "last record cut short, the file ends inside it", cutAt: -1, damage: final,
			alter: func(b []byte, off, end int64) {}, cut: 3, torn: true,
		},
		{
			name: "last record cut inside its header", cutAt: -1, damage: final,
			alter: func(b []byte, off, end int64) {}, cut: int64(len("after")) + recHeaderSize - 10, torn: true,
		},
		{
			name: "byte flipped in the last record, preallocated zeros after", prealloc: 8192, cutAt: -1, damage: final,
			alter: func(b []byte, off, end int64) { b[end-1] ^= 1 },
		},
		{
			name: "byte flipped in a record, unsynced records after", cutAt: -1, damage: 2,
			alter: func(b []byte, off, end int64) { b[off+recHeaderSize] ^= 1 },
		},
		{
			name: "a sector zeroed in a record, unsynced records after", cutAt: -1, damage: big,
			alter: func(b []byte, off, end int64) { s := firstSector(off); clear(b[s : s+wal.SectorSize]) }, torn: true,
		},
		{
			name: "last record torn at a sector boundary, preallocated zeros after", prealloc: 8192, cutAt: big, damage: big,
			alter: func(b []byte, off, end int64) { clear(b[firstSector(off):end]) }, torn: true,
		},
		{
			name: "last record torn at the start of its last sector, preallocated zeros after", prealloc: 8192, cutAt: big, damage: big,
			alter: func(b []byte, off, end int64) {
				sector := (end - 1) / wal.SectorSize * wal.SectorSize
				clear(b[sector:end]) // less than a whole sector: the record ends inside it
			},
			torn: true,
		},
		{
			name: "byte flipped in a record, a zeroed sector in a later one", cutAt: -1, damage: 2,
			alter: func(b []byte, off, end int64) {
				b[off+recHeaderSize] ^= 1
				s := firstSector(end) + wal.SectorSize
				clear(b[s : s+wal.SectorSize])
			},
		},
		{
			// Zeros from the middle of a sector: no crash loses half a
			// sector and keeps the rest before it.
			name: "last record zeroed from mid-sector, preallocated zeros after", prealloc: 8192, cutAt: big, damage: big,
			alter: func(b []byte, off, end int64) {
				// From the middle of the sector holding the record's end.
				sector := (end - 1) / wal.SectorSize * wal.SectorSize
				clear(b[sector+(end-sector)/2 : end])
			},
		},
		{
			name: "last record zeroed from mid-sector, then a byte that is not zero", prealloc: 8192, cutAt: big, damage: big,
			alter: func(b []byte, off, end int64) {
				sector := (end - 1) / wal.SectorSize * wal.SectorSize
				clear(b[sector+(end-sector)/2 : end])
				b[end+100] = 1
			},
		},
		{
			// The header's own checksum tells a damaged header from a
			// lost one: a crash would have zeroed a sector of it.
			name: "last record's header altered, so its extent is unknown", cutAt: big, damage: big,
			alter: func(b []byte, off, end int64) { b[off+4] = 0x7f },
		},
		{
			name: "last record's header altered, preallocated zeros after", prealloc: 8192, cutAt: big, damage: big,
			alter: func(b []byte, off, end int64) { b[off+4] = 0x7f },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, offs := build(t, tt.prealloc)
			if tt.cutAt >= 0 {
				// Drop the records after cutAt: zeros where the file was
				// preallocated, the end of the file otherwise.
				end := offs[tt.cutAt] + recHeaderSize + int64(len(ps[tt.cutAt]))
				if tt.prealloc > 0 {
					clear(b[end:])
				} else {
					b = b[:end]
				}
			}
			off := offs[tt.damage]
			tt.alter(b, off, off+recHeaderSize+int64(len(ps[tt.damage])))
			b = b[:int64(len(b))-tt.cut]
			got, info, err := scanSegment(memWithSegment(t, 1, b), 1, true)
			if !tt.torn {
				if err := checkCorrupt(err, wal.ErrCorrupt, wal.SegmentPath(testDir, 1), off); err != nil {
					t.Error(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v, want a torn tail", err)
			}
			if len(got) != tt.damage || !info.Torn || info.End != off {
				t.Errorf("%d records, %+v; want %d records, torn at %d", len(got), info, tt.damage, off)
			}
		})
	}
}

// recordOffsets returns the offsets of records holding ps written from
// offset start.
func recordOffsets(start int64, ps [][]byte) []int64 {
	var offs []int64
	for _, p := range ps {
		offs = append(offs, start)
		start += recHeaderSize + int64(len(p))
	}
	return offs
}

// TestScanLostPage covers the pessimistic power-loss model: any unsynced
// 4 KiB page may be lost (it reads back as it was at the last sync: zeros
// past the synced end) while later unsynced pages survive.
func TestScanLostPage(t *testing.T) {
	const page = 4096
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('A' + i%26)
	}
	appendN := func(t *testing.T, w *wal.Writer, n int) {
		for range n {
			if _, err := w.Append(value); err != nil {
				t.Fatal(err)
			}
		}
	}
	// sync syncs and returns the synced end.
	sync := func(t *testing.T, w *wal.Writer) int64 {
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		return w.Offset()
	}
	pageAt := func(start int64) func(int64) (int64, int64) {
		return func(int64) (int64, int64) { return start, start + page }
	}
	tests := []struct {
		name  string
		write func(t *testing.T, w *wal.Writer) (synced int64)
		hole  func(synced int64) (start, end int64) // zeroed bytes
		torn  bool                                  // else corrupt
	}{
		{
			name: "lost page in the unsynced part",
			write: func(t *testing.T, w *wal.Writer) int64 {
				appendN(t, w, 10)
				s := sync(t, w)
				appendN(t, w, 90)
				return s
			},
			hole: pageAt(page), torn: true,
		},
		{
			name: "lost second page in the unsynced part",
			write: func(t *testing.T, w *wal.Writer) int64 {
				appendN(t, w, 40)
				s := sync(t, w)
				appendN(t, w, 60)
				return s
			},
			hole: pageAt(2 * page), torn: true,
		},
		{
			// The page holding the sync point reverts to what was synced:
			// the damage starts exactly at the synced end, which the
			// records after it claim durable, and no further.
			name: "lost unsynced part of the page holding the sync point",
			write: func(t *testing.T, w *wal.Writer) int64 {
				appendN(t, w, 10)
				s := sync(t, w)
				appendN(t, w, 90)
				return s
			},
			hole: func(s int64) (int64, int64) { return s, (s/page + 1) * page }, torn: true,
		},
		{
			name: "lost page in the synced part, a record written after the sync",
			write: func(t *testing.T, w *wal.Writer) int64 {
				appendN(t, w, 100)
				s := sync(t, w)
				appendN(t, w, 1)
				return s
			},
			hole: pageAt(page),
		},
		{
			name: "lost page in the synced part, a later sync",
			write: func(t *testing.T, w *wal.Writer) int64 {
				appendN(t, w, 70)
				sync(t, w)
				appendN(t, w, 30)
				return sync(t, w)
			},
			hole: pageAt(page),
		},
		{
			name: "one synced byte lost before the sync point",
			write: func(t *testing.T, w *wal.Writer) int64 {
				appendN(t, w, 10)
				s := sync(t, w)
				appendN(t, w, 90)
				return s
			},
			hole: func(s int64) (int64, int64) { return s - 1, (s/page + 1) * page },
		},
		{
			// Nothing proves the page was synced: the reader cannot tell
			// this from a lost unsynced page, and must not call it
			// corruption.
			name:  "lost page in the synced part, no record written after the sync",
			write: func(t *testing.T, w *wal.Writer) int64 { appendN(t, w, 100); return sync(t, w) },
			hole:  pageAt(page), torn: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newFS(t)
			w, err := wal.Create(fsys, testDir, 1, wal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			synced := tt.write(t, w)
			// Read before Close, whose sync and mark would prove every
			// record synced.
			all, _, err := scanSegment(fsys, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			b := readSegment(t, fsys, 1)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			start, end := tt.hole(synced)
			if int64(len(b)) < end+recHeaderSize+int64(len(value)) {
				t.Fatalf("fixture: %d bytes, want a whole record after the hole [%d, %d)", len(b), start, end)
			}
			clear(b[start:end])
			wantRecs, wantEnd := expectCut(all, int(start))
			crashed := memWithSegment(t, 1, b)
			got, info, err := scanSegment(crashed, 1, true)
			if !tt.torn {
				if err := checkCorrupt(err, wal.ErrCorrupt, wal.SegmentPath(testDir, 1), wantEnd); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v, want a torn tail", err)
			}
			if diff := cmp.Diff(wantRecs, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if !info.Torn || info.End != wantEnd {
				t.Errorf("SegmentInfo %+v: want Torn with End %d", info, wantEnd)
			}
		})
	}
}

func TestScanCallbackError(t *testing.T) {
	fsys := newFS(t)
	writeSynced(t, fsys, 1, payloads(5), wal.Options{}, false)
	stop := errors.New("stop")
	r := &wal.Reader{FS: fsys, Dir: testDir}
	n := 0
	_, err := r.Scan(1, true, func(wal.Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("Scan: %v, want the callback's error as is", err)
	}
	if n != 3 {
		t.Errorf("callback ran %d times, want 3", n)
	}
}

func TestScanMissingSegment(t *testing.T) {
	r := &wal.Reader{FS: newFS(t), Dir: testDir}
	if _, err := r.Scan(1, true, nil); err == nil || errors.Is(err, wal.ErrCorrupt) {
		t.Errorf("Scan of a missing segment: %v, want a plain open error", err)
	}
}

// TestReaderReuse scans a big segment, then a small one, with one Reader:
// its buffer is reused and must not leak bytes from one scan to the next.
func TestReaderReuse(t *testing.T) {
	fsys := newFS(t)
	big, small := payloads(12), [][]byte{[]byte("small")}
	writeSynced(t, fsys, 1, big, wal.Options{}, true)
	_, info, err := scanSegment(fsys, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.OpenAppend(fsys, testDir, info, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(small...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := &wal.Reader{FS: fsys, Dir: testDir}
	for _, tc := range []struct {
		seg    wal.SegmentNum
		newest bool
		want   [][]byte
	}{{1, false, big}, {2, true, small}, {1, false, big}} {
		var got [][]byte
		info, err := r.Scan(tc.seg, tc.newest, func(rec wal.Record) error {
			got = append(got, bytes.Clone(rec.Payload))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("segment %s (-want +got):\n%s", tc.seg, diff)
		}
		if info.Torn {
			t.Errorf("segment %s: torn (%s)", tc.seg, info.TornReason)
		}
	}
}

// isPrefix reports whether got is a prefix of all. (Written out rather than
// with cmp.Equal, which is too slow for the thousands of cases here.)
func isPrefix(all, got []scanned) bool {
	if len(got) > len(all) {
		return false
	}
	for i, g := range got {
		a := all[i]
		if a.Segment != g.Segment || a.Offset != g.Offset || !bytes.Equal(a.Payload, g.Payload) {
			return false
		}
	}
	return true
}

// readCounter counts the bytes read through the files it opens.
type readCounter struct {
	vfs.FS
	n int64
}

func (c *readCounter) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c}, nil
}

type countedFile struct {
	vfs.File
	c *readCounter
}

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.n += int64(n)
	return n, err
}

// TestScanReadsEachByteOnce: a scan of the newest segment, a few records
// and then the zeros reserved after them (the segment of a store just
// reopened), reads the segment once, not a byte twice, whatever its
// length.
func TestScanReadsEachByteOnce(t *testing.T) {
	for _, size := range []int64{4 << 10, 16 << 10, 64 << 10, 100_000, 1 << 20, 3<<20 + 123} {
		fsys := newFS(t)
		writeSynced(t, fsys, 1, payloads(3), wal.Options{}, false)
		name := wal.SegmentPath(testDir, 1)
		fi, err := fsys.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > size {
			continue
		}
		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		c := &readCounter{FS: fsys}
		got, info, err := scanSegment(c, 1, true)
		if err != nil || info.Torn || len(got) != 3 {
			t.Fatalf("size %d: %d records, %+v, %v; want the 3 records, not torn", size, len(got), info, err)
		}
		if c.n != size {
			t.Errorf("a scan of a segment of %d bytes read %d", size, c.n)
		}
	}
}
