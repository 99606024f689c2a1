package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvstore/kv/bench/internal/dataset"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/kvstore/kv/kv"
)

// The data set, as kvbench's and imagebench's (cmd/kvbench/data.go:
// dataKey, and value at generation 0): 16-byte keys that look random,
// 100-byte values that hold their key.
const (
	keySize   = dataset.KeySize
	valueSize = dataset.ValueSize
	// batch is how many pairs one durable commit of the build holds.
	batch = 10_000
)

// randomKey is the index of the n-th key a reader asks for: the data
// set's keys in an order that looks random, the same in every engine.
func randomKey(n, keys int) int { return dataset.Pick(n, keys) }

// engines are the stores compared, in the order of the report: kv first,
// then its peers.
var engines = []string{"kv", "bbolt", "pebble"}

// Where each engine keeps its data under its directory.
const (
	boltFile = "bolt.db"
)

var boltBucket = []byte("kv")

// quietLogger drops pebble's informational messages.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic("pebble: fatal: " + format) }

// build makes engine e's store of the data set in dir, each in the state
// its reopen is measured from: kv checkpointed (its open maps or loads a
// snapshot and replays a log with nothing in it), pebble flushed (its
// open finds tables and no WAL to replay), bbolt as it is after its last
// Update.
func build(e, dir string, keys int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch e {
	case "kv":
		s, err := kv.Open(dir, nil)
		if err != nil {
			return err
		}
		err = load(keys, func(ks, vs [][]byte) error {
			ops := make([]kv.Op, len(ks))
			for i := range ks {
				ops[i] = kv.PutOp(ks[i], vs[i])
			}
			_, err := s.Txn(kv.Txn{Then: ops})
			return err
		})
		if err == nil {
			// The reopen then finds a snapshot of everything and a
			// small log: the state issue 20's reopen goal is about.
			err = s.Checkpoint()
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		return err
	case "bbolt":
		db, err := bolt.Open(filepath.Join(dir, boltFile), 0o600, &bolt.Options{Timeout: 10 * time.Second})
		if err != nil {
			return err
		}
		err = db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(boltBucket)
			return err
		})
		if err == nil {
			err = load(keys, func(ks, vs [][]byte) error {
				return db.Update(func(tx *bolt.Tx) error {
					b := tx.Bucket(boltBucket)
					for i := range ks {
						if err := b.Put(ks[i], vs[i]); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		return err
	case "pebble":
		db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
		if err != nil {
			return err
		}
		err = load(keys, func(ks, vs [][]byte) error {
			b := db.NewBatch()
			defer b.Close()
			for i := range ks {
				if err := b.Set(ks[i], vs[i], nil); err != nil {
					return err
				}
			}
			return b.Commit(pebble.Sync)
		})
		if err == nil {
			// Like kv's checkpoint: the reopen replays no log.
			err = db.Flush()
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return fmt.Errorf("unknown engine %q (have %v)", e, engines)
}

// load hands the data set to put in batches of batch.
func load(keys int, put func(ks, vs [][]byte) error) error { return dataset.Load(keys, batch, put) }

// store is an open store as a child reads it.
type store interface {
	// get returns key's value, valid until the next call.
	get(key []byte) ([]byte, error)
	// scan calls fn with every pair in key order; the slices are valid
	// during the call.
	scan(fn func(key, value []byte) error) error
	// scanView is scan through the store's fastest ordered walk whose
	// slices are valid during the call only: kv's ScanView (its scan
	// copies what it reads from its image, so that its entries stay
	// valid); the peers' scan, whose slices are such views already.
	scanView(fn func(key, value []byte) error) error
	close() error
}

var errNotFound = errors.New("key not found")

// open opens engine e's store in dir as a program would: read-write
// with default options, or read-only (what a one-shot reader uses).
func open(e, dir string, readOnly bool) (store, error) {
	switch e {
	case "kv":
		// Only kv's public API: Open, Get, Scan, Close.
		s, err := kv.Open(dir, &kv.Options{ReadOnly: readOnly, NoCreate: true})
		if err != nil {
			return nil, err
		}
		return &kvStore{s: s}, nil
	case "bbolt":
		db, err := bolt.Open(filepath.Join(dir, boltFile), 0o600, &bolt.Options{Timeout: 10 * time.Second, ReadOnly: readOnly})
		if err != nil {
			return nil, err
		}
		return &boltStore{db: db}, nil
	case "pebble":
		db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, ReadOnly: readOnly, ErrorIfNotExists: true})
		if err != nil {
			return nil, err
		}
		return &pebbleStore{db: db}, nil
	}
	return nil, fmt.Errorf("unknown engine %q (have %v)", e, engines)
}

type kvStore struct {
	s   *kv.Store
	buf []byte
}

// get copies the value into a buffer it reuses, as the peers' get does:
// GetAppend, whose entry is valid until the buffer is reused.
func (s *kvStore) get(key []byte) ([]byte, error) {
	e, out, err := s.s.GetAppend(s.buf[:0], key)
	s.buf = out
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("key %x: %w", key, errNotFound)
	}
	return e.Value, err
}

// getOwned is Get, whose entry is the caller's to keep: memory of its
// own for each value read from the image (the getowned row).
func (s *kvStore) getOwned(key []byte) ([]byte, error) {
	e, err := s.s.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("key %x: %w", key, errNotFound)
	}
	return e.Value, err
}

func (s *kvStore) scan(fn func(key, value []byte) error) error {
	// Scan ends early on an error it does not report: the caller's count
	// of keys catches that.
	for e := range s.s.Scan(nil, nil) {
		if err := fn(e.Key, e.Value); err != nil {
			return err
		}
	}
	return nil
}

func (s *kvStore) scanView(fn func(key, value []byte) error) error {
	for e, err := range s.s.ScanView(nil, nil) {
		if err != nil {
			return err
		}
		if err := fn(e.Key, e.Value); err != nil {
			return err
		}
	}
	return nil
}

func (s *kvStore) close() error { return s.s.Close() }

func (s *boltStore) scanView(fn func(key, value []byte) error) error { return s.scan(fn) }

func (s *pebbleStore) scanView(fn func(key, value []byte) error) error { return s.scan(fn) }

type boltStore struct {
	db *bolt.DB
	v  []byte
}

func (s *boltStore) get(key []byte) ([]byte, error) {
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		if b == nil {
			return fmt.Errorf("no bucket %q", boltBucket)
		}
		v := b.Get(key)
		if v == nil {
			return fmt.Errorf("key %x: %w", key, errNotFound)
		}
		// The value is valid only in the transaction: a copy, as kv's
		// Get returns one a caller may keep.
		s.v = append(s.v[:0], v...)
		return nil
	})
	return s.v, err
}

func (s *boltStore) scan(fn func(key, value []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		if b == nil {
			return fmt.Errorf("no bucket %q", boltBucket)
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := fn(k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) close() error { return s.db.Close() }

type pebbleStore struct {
	db *pebble.DB
	v  []byte
}

func (s *pebbleStore) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("key %x: %w", key, errNotFound)
	}
	if err != nil {
		return nil, err
	}
	s.v = append(s.v[:0], v...)
	return s.v, closer.Close()
}

func (s *pebbleStore) scan(fn func(key, value []byte) error) error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

func (s *pebbleStore) close() error { return s.db.Close() }
