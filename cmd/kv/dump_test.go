package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// TestDumpCheckpointFails: when the checkpoint after the recovery fails
// (a full disk), dump prints every key all the same and then returns the
// failure, which names the cause and says what to do: it never exits 0
// without a word.
func TestDumpCheckpointFails(t *testing.T) {
	mem := vfs.NewMem()
	opts := kv.Options{FS: mem, CheckpointBytes: -1}
	s, err := kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.Put([]byte(fmt.Sprintf("k%02d", i)), []byte(strings.Repeat("v", 300))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	mem.SetCapacity(mem.Used() + 4<<10) // room for a segment, not a snapshot
	s, err = kv.Open("/data", &opts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = runDump(&out, io.Discard, s, &dumpOpts{})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "checkpoint after the recovery failed") ||
		!strings.Contains(err.Error(), "free some space") {
		t.Errorf("dump on a full disk: %v, want the checkpoint's ENOSPC and what to do", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 50 {
		t.Errorf("dump printed %d lines, want every one of the 50 keys:\n%s", n, out.String())
	}
}
