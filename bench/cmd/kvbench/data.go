package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvstore/kv/bench/internal/dataset"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/wal"
)

// Sizes of every record the workloads write.
const (
	keySize   = dataset.KeySize
	valueSize = dataset.ValueSize
	rawPerKey = keySize + valueSize
)

// putKey writes writer w's j-th key of the put workload into k; its 64Ki
// keys per writer are distinct from the data set's w.h.p.
func putKey(k []byte, w, j int) []byte {
	k = k[:keySize]
	binary.BigEndian.PutUint64(k[0:], uint64(w)|0xfeed<<48)
	binary.BigEndian.PutUint64(k[8:], uint64(j))
	return k
}

// counterKey is the key of counter c of the mixed workload.
func counterKey(c int) []byte { return fmt.Appendf(nil, "counter/%08d", c) }

// kvLogBytesPerPut is what one Put of a 16-byte key and a 100-byte value
// adds to the kv store's log: the WAL record header and the record.
func kvLogBytesPerPut() int {
	k := make([]byte, keySize)
	v := make([]byte, valueSize)
	r := record.Record{Revision: 1, Ops: []kv.Op{kv.PutOp(k, v)}}
	return wal.HeaderSize + len(record.Append(nil, &r))
}

// latencies are per-operation durations.
type latencies []time.Duration

// percentile returns the p-quantile of d (0 < p < 1) in seconds; it sorts
// d.
func (d latencies) percentile(p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(p*float64(len(d)-1)+0.5)].Seconds()
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func peakRSS() (float64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// dirBytes returns the disk space the regular files under dir take
// (allocated blocks: badger's preallocated value log is sparse).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return err
		}
		n += min(st.Size, st.Blocks*512)
		return nil
	})
	return n, err
}
