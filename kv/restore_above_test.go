package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// olderBackup returns a file system holding, at /b, a backup of a store
// taken at revision backupRev, and the revision that store reached after
// it (its last fencing token): the backup is older than the store.
func olderBackup(t *testing.T) (fsys *vfs.MemFS, backupRev, storeRev kv.Revision) {
	t.Helper()
	fsys = vfs.NewMem()
	s, err := kv.Open("/d", &kv.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	someWrites(t, s)
	var buf bytes.Buffer
	if backupRev, err = s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if storeRev, err = s.Put([]byte("lock"), fmt.Appendf(nil, "holder %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fsys, "/b", buf.Bytes())
	return fsys, backupRev, storeRev
}

// TestRestoreAbove: with RestoreAbove(rev), the restored store holds the
// backup's map and its next write gets a revision above both the
// backup's and rev, through a close and reopen, a checkpoint and a
// reopen; a floor at or below the backup's revision changes nothing.
// (Without the skip, the first row's first write gets the backup's
// revision + 1: the test fails.)
func TestRestoreAbove(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor func(backupRev, storeRev kv.Revision) kv.Revision
	}{
		{"the old store's last revision", func(_, storeRev kv.Revision) kv.Revision { return storeRev }},
		{"far above", func(_, storeRev kv.Revision) kv.Revision { return storeRev + 1<<40 }},
		{"the backup's revision + 1", func(backupRev, _ kv.Revision) kv.Revision { return backupRev + 1 }},
		{"the backup's revision", func(backupRev, _ kv.Revision) kv.Revision { return backupRev }},
		{"below the backup's", func(backupRev, _ kv.Revision) kv.Revision { return backupRev - 3 }},
		{"zero", func(kv.Revision, kv.Revision) kv.Revision { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, backupRev, storeRev := olderBackup(t)
			floor := tc.floor(backupRev, storeRev)
			wantRev := max(backupRev, floor)
			opts := &kv.Options{FS: fsys}
			d, err := kv.Restore("/b", "/r", opts, kv.RestoreAbove(floor))
			if err != nil {
				t.Fatal(err)
			}
			if d.Revision != backupRev {
				t.Errorf("Restore returned the digest of revision %d, want the backup's %d", d.Revision, backupRev)
			}
			check := func(when string, next kv.Revision) {
				t.Helper()
				s, err := kv.Open("/r", opts)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				defer s.Close()
				got, err := s.Hash()
				if err != nil {
					t.Fatal(err)
				}
				// The backup's map until the first write, which puts a key.
				if got.Revision != next-1 || when == "right after the restore" && (got.Hash != d.Hash || got.Keys != d.Keys) {
					t.Errorf("%s: the store is at revision %d with hash %s and %d keys; want revision %d and the backup's %s, %d keys",
						when, got.Revision, got.Hash, got.Keys, next-1, d.Hash, d.Keys)
				}
				rev, err := s.Put([]byte("lock"), []byte("new holder"))
				if err != nil {
					t.Fatal(err)
				}
				if rev != next {
					t.Errorf("%s: the first write got revision %d, want %d", when, rev, next)
				}
				if when == "after a reopen" {
					if err := s.Checkpoint(); err != nil {
						t.Fatal(err)
					}
				}
			}
			check("right after the restore", wantRev+1)
			check("after a reopen", wantRev+2)
			check("after a checkpoint and a reopen", wantRev+3)
		})
	}
}

// TestRestoreAboveTooHigh: a floor at or above the largest revision a
// store can hold leaves no revision for a write, and is refused before
// anything is created; one just below it restores a store whose next
// write gets the largest revision, and whose next refuses, as any store
// there does.
func TestRestoreAboveTooHigh(t *testing.T) {
	fsys, _, _ := olderBackup(t)
	opts := &kv.Options{FS: fsys}
	for _, floor := range []kv.Revision{record.MaxRevision + 1, record.MaxRevision} {
		if _, err := kv.Restore("/b", "/r", opts, kv.RestoreAbove(floor)); err == nil {
			t.Fatalf("a floor of %d was accepted", floor)
		}
		if _, err := fsys.Stat("/r"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the refused restore above %d left /r: %v", floor, err)
		}
	}
	if _, err := kv.Restore("/b", "/r", opts, kv.RestoreAbove(record.MaxRevision-1)); err != nil {
		t.Fatal(err)
	}
	s, err := kv.Open("/r", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rev, err := s.Put([]byte("k"), []byte("v")); err != nil || rev != record.MaxRevision {
		t.Errorf("the first write on a store restored just below the largest revision: %d, %v; want %d", rev, err, record.MaxRevision)
	}
	if _, err := s.Put([]byte("k"), []byte("v")); !errors.Is(err, kv.ErrRevisionsExhausted) {
		t.Errorf("a write on a store at the largest revision: %v, want ErrRevisionsExhausted", err)
	}
}

// TestRestoreAboveCrash: a restore with a floor that dies after any of
// its file operations leaves a directory that is refused, opens empty,
// or opens to the backup's map at the floor, never below it: the segment
// with the skip is durable before the snapshot is in place. (With the
// segment created after Publish, as a restore without a floor does, the
// states after the snapshot's rename and before the skip's sync open to
// the backup's map at its own revision: the test fails.)
func TestRestoreAboveCrash(t *testing.T) {
	// someWrites commits 8 records: the backup is at revision 8.
	problems, outcomes := restoreCrashes(t, variant.None, 1000)
	if len(problems) > 0 {
		t.Errorf("%d bad states; the first: %s", len(problems), problems[0])
	} else if outcomes["the backup's map"] == 0 || outcomes["empty"] == 0 {
		t.Errorf("too few kinds of crash states: %v", outcomes)
	}
}

// TestRestoreMarks: a restored directory holds the store's marker, with
// a floor or without: it is a store before its first writable open. (A
// Restore that does not write it leaves an unmarked store: the test
// fails.)
func TestRestoreMarks(t *testing.T) {
	for _, floor := range []kv.Revision{0, 1000} {
		t.Run(fmt.Sprintf("floor=%d", floor), func(t *testing.T) {
			fsys, _, _ := olderBackup(t)
			if _, err := kv.Restore("/b", "/r", &kv.Options{FS: fsys}, kv.RestoreAbove(floor)); err != nil {
				t.Fatal(err)
			}
			kind, err := recovery.Identify(fsys, "/r")
			if err != nil || kind != recovery.DirMarked {
				t.Errorf("the restored directory is %v (%v), want %v", kind, err, recovery.DirMarked)
			}
			// A read-only open, which never writes the marker, finds
			// the same.
			s, err := kv.Open("/r", &kv.Options{FS: fsys, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if kind, _ := recovery.Identify(fsys, "/r"); kind != recovery.DirMarked {
				t.Errorf("after a read-only open the directory is %v", kind)
			}
		})
	}
}
