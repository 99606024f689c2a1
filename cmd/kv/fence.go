package main

import (
	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

// fenceFlag is --fence NAME:TOKEN on put, del and add.
type fenceFlag struct{ spec string }

func (f *fenceFlag) add(c *cobra.Command) {
	c.Flags().StringVar(&f.spec, "fence", "", "commit only while lock NAME is held with TOKEN (NAME:TOKEN, such as job:$KV_FENCE_TOKEN); else exit 4")
}

// writer returns s, or its fenced writer under --fence.
func (f *fenceFlag) writer(s *kv.Store) (storeWriter, error) {
	if f.spec == "" {
		return s, nil
	}
	name, token, err := kvcli.ParseFence(f.spec)
	if err != nil {
		return nil, err
	}
	fence, err := filelock.StoreFence(s, name, token)
	if err != nil {
		return nil, usageError{err}
	}
	return fencedWriter{s.Fenced(fence), name, token}, nil
}

func cutLast(s string, sep byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// storeWriter is what put, del and add write through: the store, or a
// fenced writer.
type storeWriter interface {
	Put(key, value []byte) (kv.Revision, error)
	Delete(key []byte) (kv.Revision, error)
	Add(key []byte, delta int64) (int64, kv.Revision, error)
}

type fencedWriter struct {
	*kv.FencedWriter
	name  string
	token int64
}

// fencedError words a refused fenced write, with its exit code.
func fencedError(err error, spec string) error { return kvcli.FencedError(err, spec) }
