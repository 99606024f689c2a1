package engine

import (
	"errors"
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleEngine is pebble with default options (an 8 MiB block cache, 4 MiB
// memtables): Put is Set with pebble.Sync, a batch is one Batch committed
// with pebble.Sync. Pebble has no transactions, so Add is a Get and a
// synced Set under a per-key lock (one of 256 stripes) in this adapter.
type pebbleEngine struct {
	db    *pebble.DB
	wo    *pebble.WriteOptions
	seed  maphash.Seed
	locks [256]sync.Mutex
}

// quietLogger drops pebble's informational messages.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic("pebble: fatal: " + format) }

func openPebble(dir string, o Options) (Engine, error) {
	opts := &pebble.Options{Logger: quietLogger{}}
	if o.LogBytes > 0 {
		opts.MemTableSize = uint64(o.LogBytes)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	wo := pebble.Sync
	if o.NoSync {
		wo = pebble.NoSync
	}
	return &pebbleEngine{db: db, wo: wo, seed: maphash.MakeSeed()}, nil
}

func (e *pebbleEngine) Put(key, value []byte) error { return e.db.Set(key, value, e.wo) }

func (e *pebbleEngine) PutBatch(keys, values [][]byte) error {
	b := e.db.NewBatch()
	defer b.Close()
	for i := range keys {
		if err := b.Set(keys[i], values[i], nil); err != nil {
			return err
		}
	}
	return b.Commit(e.wo)
}

func (e *pebbleEngine) Get(key []byte, fn func([]byte)) error {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	fn(v)
	return closer.Close()
}

func (e *pebbleEngine) Scan(fn func(key, value []byte) bool) error {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	return it.Close()
}

func (e *pebbleEngine) Add(key []byte, delta int64) (int64, error) {
	mu := &e.locks[maphash.Bytes(e.seed, key)%uint64(len(e.locks))]
	mu.Lock()
	defer mu.Unlock()
	var old []byte
	err := e.Get(key, func(v []byte) { old = append([]byte{}, v...) })
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	n, err := parseCounter(old)
	if err != nil {
		return 0, err
	}
	n += delta
	return n, e.db.Set(key, strconv.AppendInt(nil, n, 10), e.wo)
}

// Sync syncs the WAL by logging an empty record with pebble.Sync; it does
// not flush the memtable.
func (e *pebbleEngine) Sync() error  { return e.db.LogData(nil, pebble.Sync) }
func (e *pebbleEngine) Close() error { return e.db.Close() }
