package engine

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Raw is the yardstick: every write appends its key and value to one file
// (O_APPEND) and fdatasyncs it, one write at a time (a mutex serializes
// concurrent writers, so its rate is the disk's fdatasync rate); a batch
// is one write of all its records and one fdatasync. It has no index: Get,
// Scan and Add return ErrUnsupported.
type Raw struct {
	mu   sync.Mutex
	f    *os.File
	sync bool
	buf  []byte
}

// RawFile is the name of raw's file in its directory.
const RawFile = "raw.log"

func openRaw(dir string, o Options) (Engine, error) {
	f, err := os.OpenFile(filepath.Join(dir, RawFile), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &Raw{f: f, sync: !o.NoSync}, nil
}

// Put appends key and value to the file and fdatasyncs it.
func (r *Raw) Put(key, value []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(append(r.buf[:0], key...), value...)
	return r.writeLocked()
}

// PutBatch appends every pair with one write and one fdatasync.
func (r *Raw) PutBatch(keys, values [][]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = r.buf[:0]
	for i := range keys {
		r.buf = append(append(r.buf, keys[i]...), values[i]...)
	}
	return r.writeLocked()
}

func (r *Raw) writeLocked() error {
	if _, err := r.f.Write(r.buf); err != nil {
		return err
	}
	if !r.sync {
		return nil
	}
	return unix.Fdatasync(int(r.f.Fd()))
}

// ReadBack calls fn for every record of the file, in the order written,
// for records of keySize+valueSize bytes; it fails if the file is not a
// whole number of records.
func (r *Raw) ReadBack(keySize, valueSize int, fn func(key, value []byte) bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := io.ReadAll(io.NewSectionReader(r.f, 0, 1<<62))
	if err != nil {
		return 0, err
	}
	n := keySize + valueSize
	if len(b)%n != 0 {
		return 0, fmt.Errorf("engine: raw file of %d bytes is not a whole number of %d-byte records", len(b), n)
	}
	for off := 0; off < len(b); off += n {
		if !fn(b[off:off+keySize], b[off+keySize:off+n]) {
			break
		}
	}
	return len(b) / n, nil
}

// Get is not supported: raw is a log, not a store.
func (r *Raw) Get([]byte, func([]byte)) error { return ErrUnsupported }

// Scan is not supported.
func (r *Raw) Scan(func(key, value []byte) bool) error { return ErrUnsupported }

// Add is not supported.
func (r *Raw) Add([]byte, int64) (int64, error) { return 0, ErrUnsupported }

// Sync fdatasyncs the file.
func (r *Raw) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return unix.Fdatasync(int(r.f.Fd()))
}

// Close closes the file.
func (r *Raw) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}
