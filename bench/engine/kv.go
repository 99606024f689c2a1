package engine

import (
	"errors"
	"fmt"

	"github.com/kvstore/kv/kv"
)

// kvEngine is this module's store with default options: every Put is its
// own durable write (concurrent writers share group commits), a batch is
// one transaction of PutOps, Add is the store's own.
type kvEngine struct{ s *kv.Store }

func openKV(dir string, o Options) (Engine, error) {
	var opts kv.Options
	if o.NoSync {
		opts.Sync = kv.Never
	}
	if o.LogBytes > 0 {
		opts.CheckpointBytes = o.LogBytes
	}
	if o.NoCheckpoint {
		opts.CheckpointBytes = -1
	}
	s, err := kv.Open(dir, &opts)
	if err != nil {
		return nil, err
	}
	return &kvEngine{s: s}, nil
}

// AvgGroupSize returns the store's average group commit size since it
// was opened.
func (e *kvEngine) AvgGroupSize() float64 { return e.s.Stats().AvgGroupSize }

// Note says what the store did besides the workload since it was opened:
// what its recovery replayed and the checkpoints it wrote (a background
// checkpoint shares the machine with the workload).
func (e *kvEngine) Note() string {
	st := e.s.Stats()
	return fmt.Sprintf("kv: recovery replayed %d records (%d bytes, snapshot %v); %d checkpoints since open",
		st.RecoveryReplayed, st.RecoveryBytes, st.RecoverySnapshot, st.Checkpoints)
}

// Checkpoint writes a snapshot: the log an open replays is empty after it.
func (e *kvEngine) Checkpoint() error { return e.s.Checkpoint() }

// LogStats returns the bytes logged and the checkpoints written since the
// store was opened.
func (e *kvEngine) LogStats() (logged, checkpoints int64) {
	st := e.s.Stats()
	return st.BytesLogged, st.Checkpoints
}

func (e *kvEngine) Put(key, value []byte) error {
	_, err := e.s.Put(key, value)
	return err
}

// PutBatch commits one transaction of len(keys) PutOps: one record, one
// durable commit, all or nothing, which is what a user loading a batch
// would write.
func (e *kvEngine) PutBatch(keys, values [][]byte) error {
	ops := make([]kv.Op, len(keys))
	for i := range keys {
		ops[i] = kv.PutOp(keys[i], values[i])
	}
	_, err := e.s.Txn(kv.Txn{Then: ops})
	return err
}

func (e *kvEngine) Get(key []byte, fn func([]byte)) error {
	ent, err := e.s.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	fn(ent.Value)
	return nil
}

func (e *kvEngine) Scan(fn func(key, value []byte) bool) error {
	for ent := range e.s.Scan(nil, nil) {
		if !fn(ent.Key, ent.Value) {
			break
		}
	}
	return nil
}

func (e *kvEngine) Add(key []byte, delta int64) (int64, error) {
	n, _, err := e.s.Add(key, delta)
	return n, err
}

func (e *kvEngine) Sync() error  { return e.s.Sync() }
func (e *kvEngine) Close() error { return e.s.Close() }
