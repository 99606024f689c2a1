package filelock

import (
	"errors"
	"testing"
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
