package engine

import (
	"errors"
	"strconv"

	"github.com/dgraph-io/badger/v4"
)

// badgerEngine is badger with default options, SyncWrites on and its
// logger silenced: Put is one Update, a batch is one Update of all its
// Sets, Add is a Get and a Set in one Update, retried on a conflict.
type badgerEngine struct{ db *badger.DB }

func openBadger(dir string, o Options) (Engine, error) {
	opts := badger.DefaultOptions(dir).WithSyncWrites(!o.NoSync).WithLogger(nil)
	if o.LogBytes > 0 {
		// badger refuses a value threshold above 15% of the memtable;
		// kvbench's 100-byte values stay in the LSM tree either way.
		opts = opts.WithMemTableSize(o.LogBytes).WithValueThreshold(min(opts.ValueThreshold, o.LogBytes/16))
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, err
	}
	return &badgerEngine{db: db}, nil
}

func (e *badgerEngine) Put(key, value []byte) error {
	return e.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) })
}

func (e *badgerEngine) PutBatch(keys, values [][]byte) error {
	return e.db.Update(func(txn *badger.Txn) error {
		for i := range keys {
			if err := txn.Set(keys[i], values[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *badgerEngine) Get(key []byte, fn func([]byte)) error {
	return e.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { fn(v); return nil })
	})
}

func (e *badgerEngine) Scan(fn func(key, value []byte) bool) error {
	return e.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		stop := false
		for it.Rewind(); it.Valid() && !stop; it.Next() {
			item := it.Item()
			err := item.Value(func(v []byte) error {
				stop = !fn(item.Key(), v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *badgerEngine) Add(key []byte, delta int64) (int64, error) {
	for {
		var n int64
		err := e.db.Update(func(txn *badger.Txn) error {
			var old []byte
			item, err := txn.Get(key)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
			case err != nil:
				return err
			default:
				if old, err = item.ValueCopy(nil); err != nil {
					return err
				}
			}
			o, err := parseCounter(old)
			if err != nil {
				return err
			}
			n = o + delta
			return txn.Set(key, strconv.AppendInt(nil, n, 10))
		})
		if errors.Is(err, badger.ErrConflict) {
			continue
		}
		return n, err
	}
}

func (e *badgerEngine) Sync() error  { return e.db.Sync() }
func (e *badgerEngine) Close() error { return e.db.Close() }
