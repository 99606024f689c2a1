package wal_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

func BenchmarkAppend(b *testing.B) {
	// Keep the in-memory log small: rotate (outside the timer) and drop
	// the sealed segment every few MiB, so that memory stays flat.
	const rotateAt = 8 << 20
	for _, size := range []int{100, 1 << 10, 16 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			fsys := newFS(b)
			w, err := wal.Create(fsys, testDir, 1, wal.Options{SegmentSize: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { w.Close() })
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte(i)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := w.Append(payload); err != nil {
					b.Fatal(err)
				}
				if w.Offset() >= rotateAt {
					b.StopTimer()
					sealed, err := w.Rotate()
					if err != nil {
						b.Fatal(err)
					}
					if err := fsys.Remove(wal.SegmentPath(testDir, sealed)); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// replayLog is the log BenchmarkReplay reads: built on the first run of
// the benchmark only, so that plain go test stays fast, and removed by
// TestMain (main_test.go).
var replayLog replayLogState

type replayLogState struct {
	once    sync.Once
	dir     string
	segs    []wal.SegmentNum
	bytes   int64 // total size of the segments
	records int
	err     error
}

func (l *replayLogState) cleanup() {
	if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}

const (
	replayLogSize     = 256 << 20
	replaySegmentSize = 64 << 20
	replayValueSize   = 100
)

// buildReplayLog writes put records of 100-byte values, 1000 to an Append,
// into 64 MiB segments on the OS file system until the log holds at least
// 256 MiB.
func buildReplayLog() error {
	dir, err := os.MkdirTemp("", "wal-replay-")
	if err != nil {
		return err
	}
	replayLog.dir = dir
	w, err := wal.Create(vfs.OS, dir, 1, wal.Options{SegmentSize: replaySegmentSize})
	if err != nil {
		return err
	}
	value := make([]byte, replayValueSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	const batch = 1000
	bufs := make([][]byte, batch)
	rev := record.Revision(0)
	for written := int64(0); written < replayLogSize; {
		for i := range bufs {
			rev++
			r := record.Record{Revision: rev, Ops: []record.Op{{Kind: record.KindPut, Key: fmt.Appendf(nil, "key%08d", rev%100000), Value: value}}}
			bufs[i] = record.Append(bufs[i][:0], &r)
			written += wal.HeaderSize + int64(len(bufs[i]))
		}
		if _, err := w.Append(bufs...); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	replayLog.records = int(rev)
	if replayLog.segs, err = wal.ListSegments(vfs.OS, dir); err != nil {
		return err
	}
	for _, s := range replayLog.segs {
		fi, err := vfs.OS.Stat(wal.SegmentPath(dir, s))
		if err != nil {
			return err
		}
		replayLog.bytes += fi.Size()
	}
	return nil
}

func BenchmarkReplay(b *testing.B) {
	replayLog.once.Do(func() { replayLog.err = buildReplayLog() })
	if replayLog.err != nil {
		b.Fatal(replayLog.err)
	}
	l := &replayLog
	b.SetBytes(l.bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := &wal.Reader{FS: vfs.OS, Dir: l.dir}
		n := 0
		var last record.Revision
		for i, s := range l.segs {
			_, err := r.Scan(s, i == len(l.segs)-1, func(rec wal.Record) error {
				d, err := record.Decode(rec.Payload)
				if err != nil {
					return err
				}
				last = d.Revision
				n++
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		if n != l.records || last != record.Revision(l.records) {
			b.Fatalf("replayed %d records up to revision %d, want %d", n, last, l.records)
		}
	}
	b.ReportMetric(float64(l.records), "records/op")
}
