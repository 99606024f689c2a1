package kv_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/fakeclock"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// leaseInfos is a store's live leases as the tests compare them.
func leaseInfos(t *testing.T, s *kv.Store) []kv.LeaseInfo {
	t.Helper()
	return must(s.Leases())
}

// TestBackupLeases: a backup carries every lease with its TTL, absolute
// deadline and keys, as of its revision; restored, the store holds the
// same leases, its keys end at the same deadlines (a restore, like a
// restart, grants no grace), and CompareBackup tells a renewed or revoked
// lease from the backup's.
func TestBackupLeases(t *testing.T) {
	defer catch(t)
	clk := fakeclock.New(t0)
	fsys := vfs.NewMem()
	opts := &kv.Options{FS: fsys, Clock: clk}
	s := must(kv.Open("/d", opts))
	defer s.Close()
	short := must(s.Grant(10 * time.Second))
	long := must(s.Grant(60 * time.Second))
	must(s.PutLease([]byte("a"), []byte("1"), short))
	must(s.PutLease([]byte("b"), []byte("2"), short))
	must(s.PutLease([]byte("c"), []byte("3"), long))
	must(s.Put([]byte("plain"), []byte("4")))
	wantLeases := leaseInfos(t, s)

	var buf bytes.Buffer
	rev := must(s.Backup(&buf))
	d := must(kv.DecodeBackup(buf.Bytes(), nil))
	if d.Leases != 2 || d.Keys != 4 || d.Revision != rev {
		t.Fatalf("backup digest %+v, want 2 leases, 4 keys at revision %d", d, rev)
	}
	if buf.Bytes()[6] != 2 {
		t.Errorf("a backup with leases is of snapshot format version %d, want 2", buf.Bytes()[6])
	}
	writeFile(t, fsys, "/b", buf.Bytes())
	if sd, bd, err := s.CompareBackup("/b"); err != nil || sd != bd {
		t.Fatalf("CompareBackup of the store with its own backup: %+v, %+v, %v", sd, bd, err)
	}

	must(kv.Restore("/b", "/r", opts))
	r := must(kv.Open("/r", opts))
	defer r.Close()
	if diff := cmp.Diff(wantLeases, leaseInfos(t, r)); diff != "" {
		t.Errorf("restored leases (-backup +restored):\n%s", diff)
	}
	if _, err := r.KeepAlive(short); err != nil {
		t.Errorf("KeepAlive on the restored store: %v", err)
	}

	// The original renews one lease and revokes the other: each is a
	// difference from the backup, named by its lease.
	must(s.KeepAlive(short))
	clk.Advance(time.Second)
	must(s.KeepAlive(short))
	_, _, err := s.CompareBackup("/b")
	var de *kv.DiffError
	if !errors.As(err, &de) || !errors.Is(err, kv.ErrBackupDiffers) || de.Lease != short || de.Key != nil {
		t.Fatalf("CompareBackup after a renewal: %v, want a difference at lease %d", err, short)
	}
	t.Logf("after a renewal: %v", err)
	must(s.Revoke(long))
	if _, _, err := s.CompareBackup("/b"); !errors.As(err, &de) || de.Lease != short {
		t.Errorf("CompareBackup after a revoke too: %v, want the first difference, lease %d", err, short)
	}
}

// TestRestoreExpiredLease: a lease whose deadline passes while its
// backup waits is over in the restored store at once, and its expiry is
// committed there, as after a restart.
func TestRestoreExpiredLease(t *testing.T) {
	defer catch(t)
	clk := fakeclock.New(t0)
	fsys := vfs.NewMem()
	opts := &kv.Options{FS: fsys, Clock: clk}
	s := must(kv.Open("/d", opts))
	id := must(s.Grant(10 * time.Second))
	must(s.PutLease([]byte("a"), []byte("1"), id))
	must(s.Put([]byte("plain"), []byte("2")))
	var buf bytes.Buffer
	rev := must(s.Backup(&buf))
	s.Close()
	writeFile(t, fsys, "/b", buf.Bytes())

	clk.Advance(time.Minute)
	d := must(kv.Restore("/b", "/r", opts))
	if d.Leases != 1 {
		t.Fatalf("restore digest %+v, want the lease", d)
	}
	r := must(kv.Open("/r", opts))
	defer r.Close()
	if _, err := r.Get([]byte("a")); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("Get of a key whose lease ended before the restore: %v, want ErrNotFound", err)
	}
	if _, err := r.Lease(id); !errors.Is(err, kv.ErrLeaseExpired) && !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Errorf("Lease: %v, want it over", err)
	}
	// The store commits the expiry: one record above the backup's.
	deadline := time.Now().Add(5 * time.Second)
	for r.Revision() == rev && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.Revision() != rev+1 {
		t.Errorf("revision %d, want %d: the expiry committed", r.Revision(), rev+1)
	}
	if e, err := r.Get([]byte("plain")); err != nil || string(e.Value) != "2" {
		t.Errorf("the plain key: %+v, %v", e, err)
	}
}

// TestBackupLeasesWhileGranting: backups taken while another goroutine
// grants leases each hold the leases of their own revision, read with
// the map under the store's lock: here every revision after the first
// grants one lease, so a backup at revision r holds r-base leases. Run
// with -race: a lease table read outside the lock is also a data race
// with the grants.
func TestBackupLeasesWhileGranting(t *testing.T) {
	defer catch(t)
	clk := fakeclock.New(t0)
	s := must(kv.Open("/d", &kv.Options{FS: vfs.NewMem(), Clock: clk}))
	defer s.Close()
	base := s.Revision()
	const grants = 200
	done := make(chan error, 1)
	go func() {
		for range grants {
			if _, err := s.Grant(time.Minute); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	type digest struct{ Revision, Leases int64 }
	for range grants {
		var buf bytes.Buffer
		must(s.Backup(&buf))
		d := must(kv.DecodeBackup(buf.Bytes(), nil))
		want := digest{Revision: int64(d.Revision), Leases: int64(d.Revision - base)}
		if diff := cmp.Diff(want, digest{Revision: int64(d.Revision), Leases: d.Leases}); diff != "" {
			t.Fatalf("a backup's leases are not of its revision (-want +got):\n%s", diff)
		}
		if d.Revision-base == grants {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
