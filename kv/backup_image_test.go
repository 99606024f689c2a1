package kv_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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

// TestRestoreImage: a snapshot copied out of a data directory is an image
// (version 5), and is a backup all the same: ReadBackup verifies it and
// gives the store's digest at the checkpoint, Restore makes a store of it
// (with a floor too), CompareBackup compares with it, and a copy with a
// flipped byte is refused, naming the copy, leaving only the lock.
func TestRestoreImage(t *testing.T) {
	mem := vfs.NewMem()
	s, err := kv.Open("/data", &kv.Options{FS: mem, CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b", "c", "a"} {
		if _, err := s.Put([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	want, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := vfs.ReadFile(mem, "/data/"+snapshot.Name)
	if err != nil || binary.LittleEndian.Uint16(snap[6:]) != image.Version {
		t.Fatalf("the checkpoint's snapshot: %v; want an image", err)
	}
	put := func(name string, b []byte) {
		f, err := mem.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	put("/copy", snap)
	opts := &kv.Options{FS: mem}
	if got, err := kv.ReadBackup("/copy", opts, nil); err != nil || got != want {
		t.Errorf("ReadBackup of the image: %+v, %v; want %+v", got, err, want)
	}
	if _, _, err := s.CompareBackup("/copy"); err != nil {
		t.Errorf("CompareBackup with the image: %v", err)
	}
	for _, floor := range []kv.Revision{0, 100} {
		dir := fmt.Sprintf("/r%d", floor)
		got, err := kv.Restore("/copy", dir, opts, kv.RestoreAbove(floor))
		if err != nil || got != want {
			t.Fatalf("Restore of the image above %d: %+v, %v; want %+v", floor, got, err, want)
		}
		r, err := kv.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		rev, err := r.Put([]byte("d"), []byte("vd"))
		r.Close()
		if wantRev := max(want.Revision, floor) + 1; err != nil || rev != wantRev {
			t.Errorf("the first write after the restore above %d: %d, %v; want %d", floor, rev, err, wantRev)
		}
	}
	bad := bytes.Clone(snap)
	bad[4096+20] ^= 1 // in the first data block
	put("/bad", bad)
	_, err = kv.Restore("/bad", "/rbad", opts)
	var ce *kv.CorruptError
	if !errors.Is(err, kv.ErrBackupCorrupt) || !errors.As(err, &ce) || ce.File != "/bad" {
		t.Errorf("Restore of a damaged image: %v; want ErrBackupCorrupt naming /bad", err)
	}
	if names, _ := mem.List("/rbad"); len(names) != 1 || names[0] != kv.LockName {
		t.Errorf("the refused restore left %q, want only the lock", names)
	}
}
