// Package engine puts the stores that kvbench compares behind one small
// interface: this module's kv store, bbolt, pebble, badger, "walmap" (a
// tidwall/wal log with a Go map rebuilt from it at open: the design a
// user would otherwise build), and "raw", a file that every write is
// appended to and fdatasynced, which is the physical limit for one
// durable write.
//
// Every write method is durable when it returns (the record would
// survive a power loss) unless the engine was opened with Options.NoSync,
// which only the replay workload uses to lay out its log quickly: the
// records on disk are the same, one per write, whatever the syncing.
package engine

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrUnsupported is returned by an engine that has no such operation (raw
// has no Get, Scan or Add).
var ErrUnsupported = errors.New("engine: operation not supported")

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("engine: key not found")

// Engine is one open store.
type Engine interface {
	// Put sets key to value, one durable write.
	Put(key, value []byte) error
	// PutBatch sets keys[i] to values[i] for every i, atomically and with
	// one durable commit.
	PutBatch(keys, values [][]byte) error
	// Get calls fn with key's value, valid only during the call, or
	// returns ErrNotFound.
	Get(key []byte, fn func(value []byte)) error
	// Scan calls fn for every pair in key order until fn returns false.
	// The slices are valid only during the call.
	Scan(fn func(key, value []byte) bool) error
	// Add adds delta to key's decimal integer value (a missing key counts
	// as 0) in one atomic, durable read-modify-write and returns the new
	// value.
	Add(key []byte, delta int64) (int64, error)
	// Sync makes every write so far durable.
	Sync() error
	// Close closes the store cleanly.
	Close() error
}

// Options are the few settings the workloads change; the zero value is
// each engine's defaults with durable writes.
type Options struct {
	// NoSync acknowledges writes before they are durable; Sync makes them
	// durable.
	NoSync bool
	// NoCheckpoint turns off the kv store's automatic checkpoints
	// (CheckpointBytes: -1), so that its whole log is replayed at the next
	// open. The other engines ignore it.
	NoCheckpoint bool
	// LogBytes is how much an engine logs before it checkpoints or
	// flushes: kv's CheckpointBytes, pebble's and badger's MemTableSize.
	// 0 keeps each engine's default (64 MiB, 4 MiB, 64 MiB); only
	// kvbench's smoke test sets it, to reach the same states on small
	// sizes. bbolt, walmap and raw have nothing to set.
	LogBytes int64
}

// Names lists the engines in the order kvbench runs and prints them.
var Names = []string{"kv", "pebble", "bbolt", "badger", "walmap", "raw"}

// Open opens engine name in dir, creating it if needed.
func Open(name, dir string, o Options) (Engine, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch name {
	case "kv":
		return openKV(dir, o)
	case "pebble":
		return openPebble(dir, o)
	case "bbolt":
		return openBolt(dir, o)
	case "badger":
		return openBadger(dir, o)
	case "walmap":
		return openWALMap(dir, o)
	case "raw":
		return openRaw(dir, o)
	}
	return nil, fmt.Errorf("engine: unknown engine %q (have %v)", name, Names)
}

// parseCounter parses a counter's value as Add stores it; a missing value
// (nil) counts as 0.
func parseCounter(v []byte) (int64, error) {
	if v == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("engine: counter value %q: %w", v, err)
	}
	return n, nil
}
