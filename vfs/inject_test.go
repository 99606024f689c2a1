package vfs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvstore/kv/vfs"
)

var errInjected = errors.New("test: injected fault")

// TestInjectFailsMatchingOps checks that a rule's error fails exactly the
// matching operation, names its path, and keeps it from the wrapped FS.
func TestInjectFailsMatchingOps(t *testing.T) {
	tests := []struct {
		name     string
		rule     func(vfs.Op) error
		wantErr  bool // Publish fails
		wantKind vfs.OpKind
		want     map[string]string // files in the wrapped FS afterwards
	}{
		{
			name: "no fault",
			rule: func(vfs.Op) error { return nil },
			want: map[string]string{"d/": "", "d/snap": "new"},
		},
		{
			name:     "create fails",
			rule:     func(op vfs.Op) error { return failIf(op.Kind == vfs.OpCreate) },
			wantErr:  true,
			wantKind: vfs.OpCreate,
			want:     map[string]string{"d/": "", "d/snap": "old"},
		},
		{
			name:     "file sync fails",
			rule:     func(op vfs.Op) error { return failIf(op.Kind == vfs.OpSync) },
			wantErr:  true,
			wantKind: vfs.OpSync,
			want:     map[string]string{"d/": "", "d/snap": "old"},
		},
		{
			name:     "write fails",
			rule:     func(op vfs.Op) error { return failIf(op.Kind == vfs.OpWrite) },
			wantErr:  true,
			wantKind: vfs.OpWrite,
			want:     map[string]string{"d/": "", "d/snap": "old"},
		},
		{
			name:     "rename fails",
			rule:     func(op vfs.Op) error { return failIf(op.Kind == vfs.OpRename) },
			wantErr:  true,
			wantKind: vfs.OpRename,
			// Publish leaves the synced tmp behind; the next one removes it.
			want: map[string]string{"d/": "", "d/snap": "old", "d/snap.tmp": "new"},
		},
		{
			name:     "directory sync fails",
			rule:     func(op vfs.Op) error { return failIf(op.Kind == vfs.OpDirSync) },
			wantErr:  true,
			wantKind: vfs.OpDirSync,
			// The rename happened; it is only not known to be durable.
			want: map[string]string{"d/": "", "d/snap": "new"},
		},
		{
			name:     "fault on another path only",
			rule:     func(op vfs.Op) error { return failIf(strings.HasSuffix(op.Path, "other")) },
			wantKind: 0,
			want:     map[string]string{"d/": "", "d/snap": "new"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			durable(t, m, "d/snap", "old")
			var kinds []vfs.OpKind
			in := &vfs.Inject{FS: m, Rule: func(op vfs.Op) error {
				kinds = append(kinds, op.Kind)
				return tc.rule(op)
			}}
			err := vfs.Publish(in, "d", "snap", writeString("new"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Publish = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !errors.Is(err, errInjected) {
					t.Errorf("Publish = %v, want an error matching the injected one", err)
				}
				want := tc.wantKind.String() + " d/snap"
				if tc.wantKind == vfs.OpDirSync {
					want = "dirsync d:"
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name the operation and path (%q)", err, want)
				}
			}
			if len(kinds) == 0 {
				t.Fatal("the rule saw no operations")
			}
			if diff := cmp.Diff(tc.want, dump(t, m, ".")); diff != "" {
				t.Errorf("wrapped FS after Publish (-want +got):\n%s", diff)
			}
		})
	}
}

func failIf(cond bool) error {
	if cond {
		return errInjected
	}
	return nil
}

// TestInjectSeq checks that operations are numbered from 1 in order.
func TestInjectSeq(t *testing.T) {
	var got []vfs.Op
	in := &vfs.Inject{FS: newMem(t), Rule: func(op vfs.Op) error {
		got = append(got, op)
		return nil
	}}
	f, err := in.Create("d/f")
	must(t, err)
	_, err = f.WriteAt([]byte("x"), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	must(t, in.Rename("d/f", "d/g"))
	must(t, vfs.SyncDir(in, "d"))
	want := []vfs.Op{
		{Kind: vfs.OpCreate, Path: "d/f", Seq: 1},
		{Kind: vfs.OpWrite, Path: "d/f", Seq: 2, Len: 1},
		{Kind: vfs.OpSync, Path: "d/f", Seq: 3},
		{Kind: vfs.OpClose, Path: "d/f", Seq: 4},
		{Kind: vfs.OpRename, Path: "d/f", Seq: 5},
		{Kind: vfs.OpOpen, Path: "d", Seq: 6},
		{Kind: vfs.OpDirSync, Path: "d", Seq: 7},
		{Kind: vfs.OpClose, Path: "d", Seq: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// TestCrashAfter crashes Publish after every number of file-changing
// operations: the wrapped FS must then hold the old or the new file, and
// every later operation must fail.
func TestCrashAfter(t *testing.T) {
	for n := 0; ; n++ {
		m := newMem(t)
		durable(t, m, "d/snap", "old")
		rule, crashed := vfs.CrashAfter(n, errInjected)
		in := &vfs.Inject{FS: m, Rule: rule}
		err := vfs.Publish(in, "d", "snap", writeString("new"))
		if !crashed() {
			if err != nil {
				t.Fatalf("n=%d: Publish without a crash = %v", n, err)
			}
			if n < 5 {
				t.Fatalf("Publish finished after %d file-changing operations, want at least 5", n)
			}
			if got := readFile(t, m, "d/snap"); got != "new" {
				t.Errorf("n=%d: no crash, d/snap = %q, want new", n, got)
			}
			return
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("n=%d: Publish = %v, want the crash error", n, err)
		}
		for _, c := range []struct {
			name string
			fs   *vfs.MemFS
		}{{"process crash", m}, {"power loss", m.CrashClone()}} {
			b, err := vfs.ReadFile(c.fs, "d/snap")
			if err != nil || (string(b) != "old" && string(b) != "new") {
				t.Errorf("n=%d, %s: d/snap = %q, %v; want old or new", n, c.name, b, err)
			}
		}
		if _, err := in.Stat("d/snap"); !errors.Is(err, errInjected) {
			t.Errorf("n=%d: Stat after the crash = %v, want the crash error", n, err)
		}
		if n > 100 {
			t.Fatal("Publish never finished")
		}
	}
}

func TestOpKind(t *testing.T) {
	tests := []struct {
		kind    vfs.OpKind
		name    string
		mutates bool
	}{
		{vfs.OpCreate, "create", true},
		{vfs.OpOpen, "open", false},
		{vfs.OpWrite, "write", true},
		{vfs.OpRead, "read", false},
		{vfs.OpSync, "sync", true},
		{vfs.OpDirSync, "dirsync", true},
		{vfs.OpTruncate, "truncate", true},
		{vfs.OpPreallocate, "preallocate", true},
		{vfs.OpRename, "rename", true},
		{vfs.OpRemove, "remove", true},
		{vfs.OpList, "list", false},
		{vfs.OpStat, "stat", false},
		{vfs.OpMkdir, "mkdir", true},
		{vfs.OpLock, "lock", false},
		{vfs.OpClose, "close", false},
	}
	for _, tc := range tests {
		if got := tc.kind.String(); got != tc.name {
			t.Errorf("OpKind(%d).String() = %q, want %q", tc.kind, got, tc.name)
		}
		if got := tc.kind.Mutates(); got != tc.mutates {
			t.Errorf("%s.Mutates() = %v, want %v", tc.name, got, tc.mutates)
		}
	}
	if got := vfs.OpKind(200).String(); got == "" {
		t.Error("String of an unknown kind is empty")
	}
}
