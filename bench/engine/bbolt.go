package engine

import (
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// boltEngine is bbolt with default options (NoSync false): Put is one
// Update, a batch is one Update, Add is a Get and a Put in one Update.
type boltEngine struct{ db *bolt.DB }

var boltBucket = []byte("kv")

func openBolt(dir string, o Options) (Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, &bolt.Options{Timeout: 10 * time.Second, NoSync: o.NoSync})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltEngine{db: db}, nil
}

func (e *boltEngine) Put(key, value []byte) error {
	return e.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(boltBucket).Put(key, value) })
}

func (e *boltEngine) PutBatch(keys, values [][]byte) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for i := range keys {
			if err := b.Put(keys[i], values[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *boltEngine) Get(key []byte, fn func([]byte)) error {
	return e.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(boltBucket).Get(key)
		if v == nil {
			return ErrNotFound
		}
		fn(v)
		return nil
	})
}

func (e *boltEngine) Scan(fn func(key, value []byte) bool) error {
	return e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(boltBucket).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !fn(k, v) {
				break
			}
		}
		return nil
	})
}

func (e *boltEngine) Add(key []byte, delta int64) (int64, error) {
	var n int64
	err := e.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		old, err := parseCounter(b.Get(key))
		if err != nil {
			return err
		}
		n = old + delta
		return b.Put(key, strconv.AppendInt(nil, n, 10))
	})
	return n, err
}

func (e *boltEngine) Sync() error  { return e.db.Sync() }
func (e *boltEngine) Close() error { return e.db.Close() }
