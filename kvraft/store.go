package kvraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/kvstore/kv/kv"
)

// DefaultSegmentSize and DefaultCheckpointBytes are kvraft's defaults for
// the kv store below (see Options.KV).
const (
	DefaultSegmentSize     = 4 << 20
	DefaultCheckpointBytes = 8 << 20
)

// Options configure Open. The zero value is valid: kv's defaults (the OS
// file system, durable writes under kv.Always, group commit).
type Options struct {
	// KV are the options of the kv store below; Open copies them and
	// never writes into them. Sync decides when StoreLogs, DeleteRange
	// and Set return: under the default kv.Always only once durable,
	// which is what Raft's safety assumes. Any other mode is unsafe for
	// Raft (a node may vote twice in a term or lose entries it told the
	// leader it had).
	//
	// Three zero fields get kvraft's defaults rather than kv's, because
	// Raft deletes its log from the front after every snapshot and the
	// space comes back only at a kv checkpoint: SegmentSize 4 MiB,
	// CheckpointBytes 8 MiB, and LogRetention none (no kv watcher reads a
	// Raft log). Set them to keep kv's.
	KV kv.Options
	// DeleteBatch bounds the log entries one kv transaction of DeleteRange
	// deletes; a longer range is deleted in several, each durable, in
	// an order that keeps the log one run (from the front when the range
	// starts at or before the first index, otherwise from the back). 0
	// means 16384.
	DeleteBatch int
}

// Store is a raft.LogStore, raft.StableStore and raft.MonotonicLogStore on
// one kv data directory. It is safe for concurrent use.
//
// Invariants: first and last are the smallest and largest log index in
// the kv store (has says whether it holds any), changed only while wmu is
// held and only after the kv transaction that changed the log returned;
// DeleteRange holds mu for writing across its transactions, so that
// FirstIndex and LastIndex never name an index already deleted.
type Store struct {
	kv          *kv.Store
	deleteBatch int

	wmu sync.Mutex // serialises StoreLogs and DeleteRange

	mu          sync.RWMutex
	has         bool
	first, last uint64

	bufs sync.Pool // *[]byte for GetLog's GetAppend
}

var (
	_ raft.LogStore          = (*Store)(nil)
	_ raft.StableStore       = (*Store)(nil)
	_ raft.MonotonicLogStore = (*Store)(nil)
)

// Open opens (creating it if missing, recovering it after a crash) the kv
// data directory dir as a Raft log and stable store. It reads the log's
// keys once, in memory, to find the first and last index: O(n) in the
// entries kept, which Raft's compaction bounds. opts may be nil.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.DeleteBatch <= 0 {
		o.DeleteBatch = 16384
	}
	kvo := o.KV
	if kvo.SegmentSize == 0 {
		kvo.SegmentSize = DefaultSegmentSize
	}
	if kvo.CheckpointBytes == 0 {
		kvo.CheckpointBytes = DefaultCheckpointBytes
	}
	if kvo.LogRetention == 0 {
		kvo.LogRetention = -1
	}
	s, err := kv.Open(dir, &kvo)
	if err != nil {
		return nil, fmt.Errorf("kvraft: open %s: %w", dir, err)
	}
	st := &Store{kv: s, deleteBatch: o.DeleteBatch}
	if err := st.scanBounds(); err != nil {
		s.Close()
		return nil, fmt.Errorf("kvraft: open %s: %w", dir, err)
	}
	return st, nil
}

// logEnd is the end (exclusive) of the log's keys.
var logEnd = []byte{logPrefix + 1}

// scanBounds sets first and last from a scan of every log key.
func (s *Store) scanBounds() error {
	s.has, s.first, s.last = false, 0, 0
	for e, err := range s.kv.ScanView(logKey(0), logEnd) {
		if err != nil {
			return err
		}
		i, ok := keyIndex(e.Key)
		if !ok {
			return &CorruptError{Reason: fmt.Sprintf("log key %x is not 9 bytes", e.Key), Err: ErrCorrupt}
		}
		if !s.has {
			s.has, s.first = true, i
		}
		s.last = i
	}
	return nil
}

// Close closes the kv store. It makes nothing durable that was not: every
// write was durable when it returned (under kv.Always).
func (s *Store) Close() error { return s.kv.Close() }

// KV returns the kv store below, for its Stats, Checkpoint and Sync. Its
// keys are this package's (README.md, "Keys"): writing them breaks the
// store.
func (s *Store) KV() *kv.Store { return s.kv }

// FirstIndex returns the first index in the log, or 0 if it is empty. It
// reads a value cached in memory.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.first, s.kv.Err()
}

// LastIndex returns the last index in the log, or 0 if it is empty. It
// reads a value cached in memory.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last, s.kv.Err()
}

// GetLog reads the entry at index into log. A missing index returns
// raft.ErrLogNotFound (unwrapped, as raft compares it with ==); an entry
// that does not decode, a *CorruptError matching ErrCorrupt.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer s.bufs.Put(bp)
	e, buf, err := s.kv.GetAppend((*bp)[:0], logKey(index))
	*bp = buf
	if errors.Is(err, kv.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("kvraft: get log %d: %w", index, err)
	}
	if err := DecodeLog(e.Value, log); err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Index = index
		}
		return err
	}
	if log.Index != index {
		return &CorruptError{Index: index, Offset: 11, Reason: fmt.Sprintf("entry says index %d", log.Index), Err: ErrCorrupt}
	}
	return nil
}

// StoreLog stores one entry: StoreLogs of one.
func (s *Store) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores a batch of entries as one kv transaction: one record
// in the write-ahead log, durable when StoreLogs returns, with one
// fdatasync that concurrent writers (Set, SetUint64) share by group
// commit. A crash leaves all of the batch or none of it. Entries are
// stored at the index they carry, replacing any entry there.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	size := 0
	for _, l := range logs {
		size += EncodedSize(l)
	}
	// One allocation for every key and value of the batch; the kv store
	// may keep references to them, so the buffer is never reused.
	buf := make([]byte, 0, size+9*len(logs))
	ops := make([]kv.Op, len(logs))
	lo, hi := logs[0].Index, logs[0].Index
	for i, l := range logs {
		k := len(buf)
		buf = append(buf, logPrefix)
		buf = binary.BigEndian.AppendUint64(buf, l.Index)
		v := len(buf)
		buf = AppendLog(buf, l)
		ops[i] = kv.PutOp(buf[k:v:v], buf[v:len(buf):len(buf)])
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.kv.Txn(kv.Txn{Then: ops}); err != nil {
		return fmt.Errorf("kvraft: store logs %d..%d: %w", lo, hi, err)
	}
	s.mu.Lock()
	if !s.has {
		s.has, s.first, s.last = true, lo, hi
	} else {
		s.first, s.last = min(s.first, lo), max(s.last, hi)
	}
	s.mu.Unlock()
	return nil
}

// DeleteRange deletes the entries from min to max, both included, in one
// durable kv transaction (or, past Options.DeleteBatch entries, several,
// from the end that keeps the log one run: a crash between them leaves a
// log without a gap). Raft calls it to compact the front after a
// snapshot, and to cut the back after a conflict with the leader's log.
// It finds the entries by a scan of the range in memory, so a range of
// absent indexes costs nothing on disk.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	end := logEnd
	if max < math.MaxUint64 {
		end = logKey(max + 1)
	}
	var keys [][]byte
	for e, err := range s.kv.ScanView(logKey(min), end) {
		if err != nil {
			return fmt.Errorf("kvraft: delete range %d..%d: %w", min, max, err)
		}
		keys = append(keys, bytes.Clone(e.Key))
	}
	if len(keys) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fromFront := min <= s.first
	if !fromFront {
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	for len(keys) > 0 {
		n := s.deleteBatch
		if n > len(keys) {
			n = len(keys)
		}
		ops := make([]kv.Op, n)
		for i, k := range keys[:n] {
			ops[i] = kv.DeleteOp(k)
		}
		if _, err := s.kv.Txn(kv.Txn{Then: ops}); err != nil {
			// Some batches may have committed: read the bounds again.
			if serr := s.scanBounds(); serr != nil {
				err = errors.Join(err, serr)
			}
			return fmt.Errorf("kvraft: delete range %d..%d: %w", min, max, err)
		}
		keys = keys[n:]
	}
	return s.boundsAfterDelete(min, max)
}

// boundsAfterDelete updates first and last after the entries from min to
// max were deleted; s.mu is held.
func (s *Store) boundsAfterDelete(min, max uint64) error {
	switch {
	case !s.has || max < s.first || min > s.last:
	case min <= s.first && max >= s.last:
		s.has, s.first, s.last = false, 0, 0
	case min <= s.first:
		// The next key after max: one step of a scan.
		for e, err := range s.kv.ScanView(logKey(max+1), logEnd) {
			if err != nil {
				return err
			}
			s.first, _ = keyIndex(e.Key)
			break
		}
	case max >= s.last:
		// A log without a gap has min-1; otherwise scan for the key
		// before min (only a store given gaps, as raft's bench does).
		if _, err := s.kv.Get(logKey(min - 1)); err == nil {
			s.last = min - 1
			return nil
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		for e, err := range s.kv.ScanView(logKey(s.first), logKey(min)) {
			if err != nil {
				return err
			}
			s.last, _ = keyIndex(e.Key)
		}
	}
	return nil
}

// IsMonotonic reports true (raft.MonotonicLogStore). It asks Raft to keep
// the log one run of consecutive indexes: after installing a snapshot,
// Raft then deletes the whole log rather than keep entries past a gap. In
// return LastIndex after Raft cuts the back of the log costs one lookup,
// and the crash checks can require that indexes stay contiguous. The
// store does not refuse a gap (raft's bench package stores logs with
// gaps): it costs a scan in DeleteRange, nothing else.
func (s *Store) IsMonotonic() bool { return true }

// Set stores a stable-store key, durable when it returns; concurrent Sets
// and StoreLogs share one fdatasync.
func (s *Store) Set(key, val []byte) error {
	if len(key) == 0 {
		return ErrBadKey
	}
	if _, err := s.kv.Put(stableKey(key), val); err != nil {
		return fmt.Errorf("kvraft: set %q: %w", key, err)
	}
	return nil
}

// Get returns a copy of a stable-store key's value. A key never Set
// returns a nil value and ErrKeyNotFound, as raft-boltdb's Get does (its
// ErrKeyNotFound is the same text, "not found", which raft tests for).
func (s *Store) Get(key []byte) ([]byte, error) {
	if len(key) == 0 {
		return nil, ErrBadKey
	}
	e, err := s.kv.Get(stableKey(key))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("kvraft: get %q: %w", key, err)
	}
	if e.Value == nil {
		return []byte{}, nil
	}
	return e.Value, nil
}

// SetUint64 stores v under key as 8 big-endian bytes (raft-boltdb's
// encoding).
func (s *Store) SetUint64(key []byte, v uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, v))
}

// GetUint64 returns the value SetUint64 stored under key. A key never
// Set returns 0 and ErrKeyNotFound, as raft-boltdb's GetUint64 does (raft's
// InmemStore returns 0 and nil; raft accepts both). A value that is not 8
// bytes returns a *CorruptError matching ErrCorrupt.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, &CorruptError{Offset: len(v), Reason: fmt.Sprintf("stable value of %q is %d bytes, not 8", key, len(v)), Err: ErrCorrupt}
	}
	return binary.BigEndian.Uint64(v), nil
}
