package crashsim

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kv/vfs"
)

// ev builds events for the model tests; inode 1 is "f" unless a create
// says otherwise.
func write(path string, ino int, off int64, data string) vfs.Event {
	return vfs.Event{Kind: vfs.EvData, Op: "write", Path: path, Inode: ino, Off: off, Data: []byte(data)}
}

func TestModelRules(t *testing.T) {
	big := string(bytes.Repeat([]byte("x"), 1500))
	has := func(name, content string) func([]State) bool {
		return func(ss []State) bool {
			for _, s := range ss {
				if c, ok := s[name]; ok && string(c) == content {
					return true
				}
			}
			return false
		}
	}
	lacks := func(name string) func([]State) bool {
		return func(ss []State) bool {
			for _, s := range ss {
				if _, ok := s[name]; !ok {
					return true
				}
			}
			return false
		}
	}
	always := func(name, content string) func([]State) bool {
		return func(ss []State) bool {
			for _, s := range ss {
				if string(s[name]) != content {
					return false
				}
			}
			return len(ss) > 0
		}
	}
	tests := []struct {
		name    string
		initial State
		events  []vfs.Event
		machine func([]State) bool
		process func(State) bool
	}{
		{
			name: "created and synced but directory not synced: may be gone",
			events: []vfs.Event{
				{Kind: vfs.EvMeta, Op: "create", Path: "/d/new", Inode: 1},
				write("/d/new", 1, 0, "data"),
				{Kind: vfs.EvSync, Op: "fdatasync", Path: "/d/new", Inode: 1},
			},
			machine: func(ss []State) bool { return lacks("new")(ss) && has("new", "data")(ss) },
			process: func(s State) bool { return string(s["new"]) == "data" },
		},
		{
			name: "created, synced, directory synced: always there, whole",
			events: []vfs.Event{
				{Kind: vfs.EvMeta, Op: "create", Path: "/d/new", Inode: 1},
				write("/d/new", 1, 0, "data"),
				{Kind: vfs.EvSync, Op: "fdatasync", Path: "/d/new", Inode: 1},
				{Kind: vfs.EvDirSync, Op: "fsync", Path: "/d"},
			},
			machine: always("new", "data"),
		},
		{
			name: "directory synced but data not: the name survives with missing data",
			events: []vfs.Event{
				{Kind: vfs.EvMeta, Op: "create", Path: "/d/new", Inode: 1},
				write("/d/new", 1, 0, "data"),
				{Kind: vfs.EvDirSync, Op: "fsync", Path: "/d"},
			},
			machine: func(ss []State) bool { return has("new", "")(ss) && has("new", "data")(ss) && !lacks("new")(ss) },
		},
		{
			name:    "rename then directory sync: the new name survives",
			initial: State{"a.tmp": []byte("new"), "a": []byte("old")},
			events: []vfs.Event{
				{Kind: vfs.EvMeta, Op: "rename", Path: "/d/a.tmp", To: "/d/a", Inode: 1},
				{Kind: vfs.EvDirSync, Op: "fsync", Path: "/d"},
			},
			machine: func(ss []State) bool { return always("a", "new")(ss) && lacks("a.tmp")(ss) },
		},
		{
			name:    "rename without directory sync: either name, atomically",
			initial: State{"a.tmp": []byte("new"), "a": []byte("old")},
			events: []vfs.Event{
				{Kind: vfs.EvMeta, Op: "rename", Path: "/d/a.tmp", To: "/d/a", Inode: 1},
			},
			machine: func(ss []State) bool { return has("a", "new")(ss) && has("a", "old")(ss) && len(ss) == 2 },
		},
		{
			name:    "unlink without directory sync: the file may come back",
			initial: State{"f": []byte("x")},
			events:  []vfs.Event{{Kind: vfs.EvMeta, Op: "unlink", Path: "/d/f", Inode: 1}},
			machine: func(ss []State) bool { return has("f", "x")(ss) && lacks("f")(ss) },
			process: func(s State) bool { _, ok := s["f"]; return !ok },
		},
		{
			name:    "unsynced append: any prefix, torn at 512-byte boundaries",
			initial: State{"f": []byte("abc")},
			events:  []vfs.Event{write("/d/f", 1, 3, big)},
			machine: func(ss []State) bool {
				return has("f", "abc")(ss) && has("f", "abc"+big)(ss) && has("f", "abc"+big[:509])(ss) &&
					has("f", "abc"+big[:1021])(ss) && len(ss) == 4
			},
		},
		{
			name:    "synced data is never lost",
			initial: State{"f": []byte("abc")},
			events: []vfs.Event{
				write("/d/f", 1, 3, "def"),
				{Kind: vfs.EvSync, Op: "fdatasync", Path: "/d/f", Inode: 1},
				write("/d/f", 1, 6, "ghi"),
			},
			machine: func(ss []State) bool { return has("f", "abcdef")(ss) && has("f", "abcdefghi")(ss) && len(ss) == 2 },
		},
		{
			name:    "a failed sync loses its writes for good",
			initial: State{"f": []byte("abc")},
			events: []vfs.Event{
				write("/d/f", 1, 3, "lost"),
				{Kind: vfs.EvSyncFail, Op: "fdatasync-failed", Path: "/d/f", Inode: 1},
				write("/d/f", 1, 7, "kept"),
				{Kind: vfs.EvSync, Op: "fdatasync", Path: "/d/f", Inode: 1},
			},
			machine: func(ss []State) bool {
				return len(ss) == 1 && len(ss[0]["f"]) == 11 && string(ss[0]["f"][3:7]) == "\x00\x00\x00\x00"
			},
			process: func(s State) bool { return string(s["f"]) == "abclostkept" },
		},
		{
			name:    "truncate is a change of contents, durable at the next sync",
			initial: State{"f": []byte("abcdef")},
			events:  []vfs.Event{{Kind: vfs.EvMeta, Op: "truncate", Path: "/d/f", Inode: 1, Size: 2}},
			machine: func(ss []State) bool { return has("f", "abcdef")(ss) && has("f", "ab")(ss) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			init := tc.initial
			if init == nil {
				init = State{}
			}
			m := newModel("/d", init)
			for _, e := range tc.events {
				if err := m.apply(e); err != nil {
					t.Fatal(err)
				}
			}
			ss, sampled := m.machineStates(1000, rand.New(rand.NewPCG(1, 2)))
			if sampled {
				t.Fatal("sampled")
			}
			if tc.machine != nil && !tc.machine(ss) {
				t.Errorf("machine states do not follow the rule: %q", ss)
			}
			if tc.process != nil && !tc.process(m.processState()) {
				t.Errorf("process state does not follow the rule: %q", m.processState())
			}
		})
	}
}

// TestModelPessimistic: a lost page in the middle reads as zeros while a
// later page survives.
func TestModelPessimistic(t *testing.T) {
	data := bytes.Repeat([]byte("y"), 3*4096)
	m := newModel("/d", State{"f": nil})
	m.apply(write("/d/f", 1, 0, string(data)))
	found := false
	for _, s := range m.pessimisticStates(64, rand.New(rand.NewPCG(1, 2))) {
		f := s["f"]
		if len(f) == len(data) && f[4096] == 0 && f[2*4096] == 'y' {
			found = true
		}
	}
	if !found {
		t.Error("no pessimistic state with a hole followed by data")
	}
}

// TestMachineSampling: past the limit, states are sampled and it says so.
func TestMachineSampling(t *testing.T) {
	m := newModel("/d", State{})
	for i := range 12 {
		name := "/d/f" + string(rune('a'+i))
		m.apply(vfs.Event{Kind: vfs.EvMeta, Op: "create", Path: name, Inode: i + 1})
		m.apply(write(name, i+1, 0, "data"))
	}
	ss, sampled := m.machineStates(50, rand.New(rand.NewPCG(1, 2)))
	if !sampled || len(ss) != 50 {
		t.Errorf("sampled=%v, %d states; want a sample of 50", sampled, len(ss))
	}
}

// TestZeroTears: a write of zeros into the log's reservation is torn only
// at its first and last sector boundary, but zeros written over data are
// torn at every boundary, since each tear leaves different data.
func TestZeroTears(t *testing.T) {
	zeros := string(make([]byte, 4096))
	for _, tc := range []struct {
		name    string
		initial string
		want    []int // the lengths of the choices
	}{
		{"past the end", "rec", []int{3, 512, 4096, 4099}},
		{"over zeros", "rec" + zeros, []int{4099, 4099, 4099, 4099}},
		{"over data", "rec" + strings.Repeat("x", 4096), slices.Repeat([]int{4099}, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &inode{durable: []byte(tc.initial), pending: []fileOp{{kind: "write", off: 3, data: []byte(zeros)}}}
			var got []int
			for _, c := range contentChoices(n) {
				got = append(got, len(c))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("choices of lengths %v, want %v", got, tc.want)
			}
		})
	}
}
