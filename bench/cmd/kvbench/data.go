package main

import (
	"bufio"
	"bytes"
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

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/wal"
)

// Sizes of every record the workloads write.
const (
	keySize   = 16
	valueSize = 100
	rawPerKey = keySize + valueSize
)

// splitmix64 is a bijection on uint64 that scatters consecutive inputs.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// dataKey writes the i-th key of the data set into k: 16 bytes that look
// random, distinct for distinct i (the first 8 bytes are a bijection of
// i), so that no key list has to be kept in memory.
func dataKey(k []byte, i int) []byte {
	k = k[:keySize]
	binary.BigEndian.PutUint64(k[0:], splitmix64(uint64(i)))
	binary.BigEndian.PutUint64(k[8:], splitmix64(uint64(i)^0x5bd1e995))
	return k
}

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

// value writes the value of key at generation gen into v: the key, the
// generation, and a filler that depends on both, 100 bytes in all.
func value(v, key []byte, gen uint64) []byte {
	v = v[:valueSize]
	copy(v, key)
	binary.LittleEndian.PutUint64(v[keySize:], gen)
	for i := keySize + 8; i < valueSize; i++ {
		v[i] = byte('a' + (uint64(i)+gen)%26)
	}
	return v
}

// checkValue returns the generation of v if v is a value that value wrote
// for key.
func checkValue(key, v []byte) (uint64, error) {
	if len(v) != valueSize || !bytes.Equal(v[:keySize], key) {
		return 0, fmt.Errorf("key %x: read back a value of %d bytes that is not this key's (%.24x)", key, len(v), v)
	}
	gen := binary.LittleEndian.Uint64(v[keySize:])
	for i := keySize + 8; i < valueSize; i++ {
		if v[i] != byte('a'+(uint64(i)+gen)%26) {
			return 0, fmt.Errorf("key %x: value damaged at byte %d", key, i)
		}
	}
	return gen, nil
}

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
