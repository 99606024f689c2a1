package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNetworkFS(t *testing.T) {
	none := func(string) string { return "" }
	tests := []struct {
		name    string
		typ     int64
		subtype func(string) string
		refused bool
	}{
		{"ext4", 0xEF53, none, false},
		{"tmpfs", 0x01021994, none, false},
		{"NFS", 0x6969, none, true},
		{"CIFS", 0xFF534D42, none, true},
		{"SMB2", 0xFE534D42, none, true},
		{"sshfs", fuseMagic, func(string) string { return "sshfs" }, true},
		{"local FUSE", fuseMagic, func(string) string { return "bindfs" }, false},
	}
	for _, tc := range tests {
		err := classifyFS("/x", tc.typ, tc.subtype)
		if refused := errors.Is(err, ErrNetworkFS); refused != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
	if err := checkLocalFS(t.TempDir()); err != nil {
		t.Errorf("the test's own directory: %v", err)
	}
}

// TestJudgeUnopenableHolderFile: a holder file that cannot be opened
// (here a symlink to itself: ELOOP, even for root) tells nothing about
// its holder, neither alive nor dead: the judge goes on to the pid,
// which is this live process. Judged dead, the holder's lock would be
// taken from under it.
func TestJudgeUnopenableHolderFile(t *testing.T) {
	dir := t.TempDir()
	l := openLocker(t, dir)
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name  string
		file  string
		make  func(path string) error
		alive bool
	}{
		{"symlink loop", "loop.holder", func(p string) error { return os.Symlink(filepath.Base(p), p) }, true},
		{"unlocked", "free.holder", func(p string) error { return os.WriteFile(p, nil, 0o600) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(filepath.Join(dir, HolderDirName, tc.file)); err != nil {
				t.Fatal(err)
			}
			m := Marker{PID: os.Getpid(), PIDStart: selfStart(), PIDNS: pidNamespace(), BootID: bootID(), Host: host,
				Renewed: time.Now(), HolderFile: tc.file}
			if alive, why := l.judge(&m, time.Now()); alive != tc.alive {
				t.Errorf("holder judged alive %v (%s), want %v", alive, why, tc.alive)
			}
		})
	}
}
