package kv_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/snapshot/image"
	"github.com/kvstore/kv/vfs"
)

// TestBackupStaysFrames: a store's checkpoint writes its snapshot as an
// image (version 5), and its backup is still the frames of version 1,
// byte for byte what snapshot.Encode makes of the same map at covered
// segment 0 (FORMAT.md, "Backup").
func TestBackupStaysFrames(t *testing.T) {
	mem := vfs.NewMem()
	s, err := kv.Open("/data", &kv.Options{FS: mem, CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Put([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	snap, err := vfs.ReadFile(mem, "/data/"+snapshot.Name)
	if err != nil || len(snap) < 8 || binary.LittleEndian.Uint16(snap[6:]) != image.Version {
		t.Fatalf("the checkpoint's snapshot: %d bytes, %v; want an image (version %d)", len(snap), err, image.Version)
	}
	var got bytes.Buffer
	rev, err := s.Backup(&got)
	if err != nil {
		t.Fatal(err)
	}
	var entries []*record.Entry
	for e := range s.Scan(nil, nil) {
		c := e
		entries = append(entries, &record.Entry{Key: c.Key, Value: c.Value, CreateRev: c.CreateRev, ModRev: c.ModRev, Version: c.Version})
	}
	var want bytes.Buffer
	meta := snapshot.Meta{Revision: rev, Count: uint64(len(entries))}
	if err := snapshot.Encode(&want, meta, func(yield func(*record.Entry) bool) {
		for _, e := range entries {
			if !yield(e) {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("backup of %d bytes (version %d), want the %d bytes of a version 1 snapshot", got.Len(), binary.LittleEndian.Uint16(got.Bytes()[6:]), want.Len())
	}
}
