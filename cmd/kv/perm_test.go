package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPermissionNamesTheFile runs the real kv as a user without the
// rights it needs (nobody, when the test runs as root, for whom
// permissions do not hold; else the test's own user on files it made
// unwritable) and checks that the error names the file that refused: the
// directory when the file to create does not exist, the file when it does.
func TestPermissionNamesTheFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kv")
	}
	tmp, err := os.MkdirTemp("", "kvperm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "kv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(tmp, "data")
	if code, _, stderr := kvRun(t, "", data, "put", "--create", "k", "v"); code != 0 {
		t.Fatal(stderr)
	}
	asOther := func(args ...string) (string, bool) {
		cmd := exec.Command(bin, args...)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	lock := filepath.Join(data, "LOCK")
	// The marker (KVSTORE) is read before LOCK is opened: readable, so
	// that the refusals below are LOCK's.
	if err := os.Chmod(filepath.Join(data, "KVSTORE"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		prepare func() error
		args    []string
		want    string
	}{
		{"no LOCK, directory not writable", func() error {
			if err := os.Remove(lock); err != nil {
				return err
			}
			return os.Chmod(data, 0o555)
		}, []string{data, "put", "k", "v2"}, "kv: " + data + ": permission denied: this user cannot open LOCK in it\n"},
		{"LOCK not writable", func() error {
			if err := os.Chmod(data, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(lock, nil, 0o444); err != nil {
				return err
			}
			return os.Chmod(lock, 0o444)
		}, []string{data, "put", "k", "v2"}, "kv: " + lock + ": permission denied (open)\n"},
		{"a new store where one cannot be made", func() error { return os.Chmod(tmp, 0o555) },
			[]string{filepath.Join(tmp, "new"), "put", "--create", "k", "v"}, "kv: " + tmp + ": permission denied: this user cannot mkdir new in it\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.prepare(); err != nil {
				t.Fatal(err)
			}
			out, ok := asOther(tc.args...)
			if ok || out != tc.want {
				t.Errorf("kv %s: ok %v, output %q; want a failure, %q", strings.Join(tc.args, " "), ok, out, tc.want)
			}
		})
	}
	os.Chmod(tmp, 0o755)
}
