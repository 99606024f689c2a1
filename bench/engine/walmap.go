package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/tidwall/wal"
	"golang.org/x/sys/unix"
)

// walMap is the design a user builds instead of a store: an append-only
// log (github.com/tidwall/wal) and a Go map from key to value, rebuilt by
// replaying the whole log at open. It is the peer closest to kv's design
// (kv is a log and an in-memory index too), without kv's group commit,
// snapshots, torn-tail handling or ordered tree.
//
// The log is opened with tidwall/wal's defaults (20 MB segments, binary
// format) but NoSync: true, and the adapter fdatasyncs the tail segment
// after every write: tidwall/wal's own durable mode (NoSync: false) calls
// fsync, where kv and raw call fdatasync, and the comparison is meant to
// be one fdatasync against one fdatasync. When tidwall/wal starts a new
// segment it fsyncs the old one itself; the adapter then fsyncs the
// directory (which tidwall/wal does not), so that the new file's name is
// durable too.
//
// Each Put and each PutBatch is one log entry: a count, then each pair as
// a uvarint length and the key, a uvarint length and the value. A batch is
// therefore one entry and one fdatasync. Writers are serialized by a
// mutex held across the write and its fdatasync (there is no group
// commit); the map is changed after the sync, under a read-write lock that
// Get takes for reading, so a reader never waits for a sync and never sees
// a write that is not durable. Scan copies the map's pairs, sorts them and
// walks them: a Go map has no order. The log is never compacted.
type walMap struct {
	wmu     sync.Mutex // serializes writers: the log, next, the tail
	log     *wal.Log
	dir     string
	noSync  bool
	next    uint64   // the index of the next entry
	tail    *os.File // the tail segment, for fdatasync
	tailIdx uint64   // the first index of the tail segment (its file name)
	tailLen int      // bytes tidwall/wal holds in the tail segment
	dirty   bool     // a segment was created since the directory was last fsynced
	segSize int      // the log's segment size
	buf     []byte

	mu sync.RWMutex // guards m
	m  map[string][]byte
}

// walSegmentSize is tidwall/wal's default segment size, which the adapter
// opens the log with and mirrors to know which file is the tail.
const walSegmentSize = 20 << 20

func openWALMap(dir string, o Options) (Engine, error) {
	return openWALMapSize(dir, o, walSegmentSize)
}

func openWALMapSize(dir string, o Options, segSize int) (*walMap, error) {
	fresh, err := walSegments(dir)
	if err != nil {
		return nil, err
	}
	log, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: segSize, NoCopy: true})
	if err != nil {
		return nil, err
	}
	e := &walMap{log: log, dir: dir, noSync: o.NoSync, segSize: segSize, m: map[string][]byte{}, dirty: len(fresh) == 0}
	fail := func(err error) (*walMap, error) {
		log.Close()
		if e.tail != nil {
			e.tail.Close()
		}
		return nil, err
	}
	first, err := log.FirstIndex()
	if err != nil {
		return fail(err)
	}
	last, err := log.LastIndex()
	if err != nil {
		return fail(err)
	}
	// Replay the whole log into the map.
	if last > 0 {
		for i := first; i <= last; i++ {
			data, err := log.Read(i)
			if err != nil {
				return fail(fmt.Errorf("walmap: entry %d: %w", i, err))
			}
			err = decodePairs(data, func(k, v []byte) { e.m[string(k)] = slices.Clone(v) })
			if err != nil {
				return fail(fmt.Errorf("walmap: entry %d: %w", i, err))
			}
		}
		// The replay cached whole segments; the map has what it needs.
		if err := log.ClearCache(); err != nil {
			return fail(err)
		}
	}
	e.next = last + 1
	segs, err := walSegments(dir)
	if err != nil || len(segs) == 0 {
		return fail(fmt.Errorf("walmap: no segment after open: %v", err))
	}
	e.tailIdx = segs[len(segs)-1]
	if err := e.openTail(); err != nil {
		return fail(err)
	}
	fi, err := e.tail.Stat()
	if err != nil {
		return fail(err)
	}
	e.tailLen = int(fi.Size())
	if !e.noSync {
		if err := e.syncLocked(); err != nil {
			return fail(err)
		}
	}
	return e, nil
}

// walSegments returns the first indexes of the log's segment files, in
// order (tidwall/wal names each by its first index, 20 digits).
func walSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var idx []uint64
	for _, d := range ents {
		if len(d.Name()) != 20 || !d.Type().IsRegular() {
			continue
		}
		if n, err := strconv.ParseUint(d.Name(), 10, 64); err == nil && n > 0 {
			idx = append(idx, n)
		}
	}
	slices.Sort(idx)
	return idx, nil
}

func (e *walMap) openTail() error {
	if e.tail != nil {
		e.tail.Close()
	}
	f, err := os.Open(filepath.Join(e.dir, fmt.Sprintf("%020d", e.tailIdx)))
	if err != nil {
		return fmt.Errorf("walmap: the tail segment: %w", err)
	}
	e.tail = f
	return nil
}

// TailSegment returns the name of the file the adapter fdatasyncs.
func (e *walMap) TailSegment() string {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return filepath.Base(e.tail.Name())
}

// appendPairs encodes pairs as one log entry.
func appendPairs(b []byte, keys, values [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for i := range keys {
		b = binary.AppendUvarint(b, uint64(len(keys[i])))
		b = append(b, keys[i]...)
		b = binary.AppendUvarint(b, uint64(len(values[i])))
		b = append(b, values[i]...)
	}
	return b
}

var errBadEntry = errors.New("walmap: bad entry")

// decodePairs calls fn for every pair of an entry appendPairs wrote.
func decodePairs(b []byte, fn func(k, v []byte)) error {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return errBadEntry
	}
	b = b[w:]
	field := func() ([]byte, bool) {
		l, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < l {
			return nil, false
		}
		f := b[w : w+int(l)]
		b = b[w+int(l):]
		return f, true
	}
	for range n {
		k, ok := field()
		if !ok {
			return errBadEntry
		}
		v, ok := field()
		if !ok {
			return errBadEntry
		}
		fn(k, v)
	}
	if len(b) != 0 {
		return errBadEntry
	}
	return nil
}

// writeLocked appends one entry, makes it durable (unless NoSync) and then
// applies it to the map. e.wmu is held.
func (e *walMap) writeLocked(keys, values [][]byte) error {
	e.buf = appendPairs(e.buf[:0], keys, values)
	// tidwall/wal starts a new segment before an entry when the tail
	// holds more than SegmentSize bytes, and after an entry that brings it
	// to SegmentSize; mirror it to know which file to fdatasync.
	if e.tailLen > e.segSize {
		e.tailIdx, e.tailLen, e.dirty = e.next, 0, true
	}
	if err := e.log.Write(e.next, e.buf); err != nil {
		return err
	}
	e.next++
	var hdr [binary.MaxVarintLen64]byte
	e.tailLen += binary.PutUvarint(hdr[:], uint64(len(e.buf))) + len(e.buf)
	if e.tailLen >= e.segSize {
		e.tailIdx, e.tailLen, e.dirty = e.next, 0, true
	}
	if filepath.Base(e.tail.Name()) != fmt.Sprintf("%020d", e.tailIdx) {
		if err := e.openTail(); err != nil {
			return err
		}
	}
	if !e.noSync {
		if err := e.syncLocked(); err != nil {
			return err
		}
	}
	e.mu.Lock()
	for i := range keys {
		e.m[string(keys[i])] = slices.Clone(values[i])
	}
	e.mu.Unlock()
	return nil
}

// syncLocked fsyncs the directory if a segment was created since it was
// last synced (a new file's name is durable only then), and fdatasyncs
// the tail segment: the entries written since the last sync. Segments
// before the tail were fsynced by tidwall/wal when it left them.
func (e *walMap) syncLocked() error {
	if e.dirty {
		d, err := os.Open(e.dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("walmap: fsync %s: %w", e.dir, err)
		}
		e.dirty = false
	}
	return unix.Fdatasync(int(e.tail.Fd()))
}

func (e *walMap) Put(key, value []byte) error {
	return e.PutBatch([][]byte{key}, [][]byte{value})
}

// PutBatch writes the batch as one log entry with one fdatasync.
func (e *walMap) PutBatch(keys, values [][]byte) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return e.writeLocked(keys, values)
}

func (e *walMap) Get(key []byte, fn func([]byte)) error {
	e.mu.RLock()
	v, ok := e.m[string(key)]
	e.mu.RUnlock()
	if !ok {
		return ErrNotFound
	}
	fn(v) // values are replaced, never changed in place
	return nil
}

// Scan copies the map's pairs, sorts them by key and calls fn in order.
func (e *walMap) Scan(fn func(key, value []byte) bool) error {
	type pair struct {
		k string
		v []byte
	}
	e.mu.RLock()
	ps := make([]pair, 0, len(e.m))
	for k, v := range e.m {
		ps = append(ps, pair{k, v})
	}
	e.mu.RUnlock()
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(a.k, b.k) })
	for _, p := range ps {
		if !fn([]byte(p.k), p.v) {
			break
		}
	}
	return nil
}

// Add reads the counter from the map and writes its new value, under the
// writers' mutex, so no other write comes between.
func (e *walMap) Add(key []byte, delta int64) (int64, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.RLock()
	old := e.m[string(key)]
	e.mu.RUnlock()
	n, err := parseCounter(old)
	if err != nil {
		return 0, err
	}
	n += delta
	return n, e.writeLocked([][]byte{key}, [][]byte{strconv.AppendInt(nil, n, 10)})
}

func (e *walMap) Sync() error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return e.syncLocked()
}

// Close fsyncs and closes the log (tidwall/wal's Close syncs the tail).
func (e *walMap) Close() error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	err := e.syncLocked()
	if cerr := e.log.Close(); err == nil {
		err = cerr
	}
	if cerr := e.tail.Close(); err == nil {
		err = cerr
	}
	return err
}
