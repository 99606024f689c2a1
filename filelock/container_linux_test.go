package filelock

// Liveness across containers on one kernel: holders run by the lockhelper
// in namespaces of their own (unshare(1)), judged from the test process.
// One host is one kernel (one boot id): a holder file's kernel lock is
// proof wherever the kernel is the same, whatever the hostname; a pid is
// proof only in the pid namespace it was recorded in.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nsHostname is the hostname of the helpers run in a UTS namespace.
const nsHostname = "kv-other-container"

// nsProbe caches whether unshare(1) can make each set of namespaces here.
var nsProbe sync.Map // strings.Join(flags, " ") → error

// needNamespaces skips the test when unshare(1) cannot make the
// namespaces flags ask for: not installed, or not allowed (EPERM in an
// unprivileged container, a seccomp profile, user namespaces off).
func needNamespaces(t testing.TB, flags ...string) {
	t.Helper()
	key := strings.Join(flags, " ")
	v, ok := nsProbe.Load(key)
	if !ok {
		var err error
		if _, lerr := exec.LookPath("unshare"); lerr != nil {
			err = fmt.Errorf("unshare(1) not found: %w", lerr)
		} else {
			args := append(append([]string{}, flags...), "--", "sh", "-c", nsScript(flags, "exit 0"))
			if out, rerr := exec.Command("unshare", args...).CombinedOutput(); rerr != nil {
				err = fmt.Errorf("unshare %s: %v: %s", key, rerr, strings.TrimSpace(string(out)))
			}
		}
		v, _ = nsProbe.LoadOrStore(key, err)
	}
	if err, _ := v.(error); err != nil {
		t.Skipf("cannot make namespaces here (%v): the container tests need unshare(1) allowed to make them", err)
	}
}

// nsScript is the shell script unshare runs with the flags given: then,
// after setting the hostname to nsHostname only where unshare made a UTS
// namespace of its own (anywhere else, hostname would rename the
// machine).
func nsScript(flags []string, then string) string {
	if slices.Contains(flags, "--uts") {
		return "hostname " + nsHostname + " && " + then
	}
	return then
}

// nsHolder is a lockhelper run in namespaces of its own.
type nsHolder struct {
	*proc
	helperPID int // the helper's pid in the test's pid namespace
}

// Namespaces a helper can be started in (startInNamespaces).
const (
	nsPID           = "pid"            // a pid namespace of its own, with its own /proc
	nsPIDParentProc = "pid-parentproc" // a pid namespace of its own, with the parent's /proc
	nsUTS           = "uts"            // a UTS namespace, with the hostname nsHostname
)

// startInNamespaces runs the lockhelper on dir under unshare(1), in new
// namespaces of the kinds ns names. In a pid namespace the helper is pid
// 1; with its own /proc, /proc/1 is itself. It skips the test where
// unshare may not make them.
func startInNamespaces(t testing.TB, dir string, ns []string, flags ...string) *nsHolder {
	t.Helper()
	var uflags []string
	fork := false
	for _, n := range ns {
		switch n {
		case nsPID, nsPIDParentProc:
			// --kill-child: the helper, and so its namespace, dies with
			// unshare, which the cleanup kills.
			uflags = append(uflags, "--pid", "--fork", "--kill-child")
			if n == nsPID {
				uflags = append(uflags, "--mount-proc")
			}
			fork = true
		case nsUTS:
			uflags = append(uflags, "--uts")
		default:
			t.Fatalf("namespace %q", n)
		}
	}
	needNamespaces(t, uflags...)
	args := append(append([]string{}, uflags...), "--", "sh", "-c", nsScript(uflags, `exec "$0" "$@"`), helperBin, "-dir", dir)
	p := startHelperCmd(t, exec.Command("unshare", append(args, flags...)...))
	h := &nsHolder{proc: p, helperPID: p.pid}
	if fork {
		h.helperPID = childOf(t, p.pid) // unshare forked the helper
		// Kill the helper before unshare, which then reaps it (killed
		// first, unshare would leave it to init to reap).
		t.Cleanup(func() {
			if h.cmd.ProcessState == nil {
				h.die()
			}
		})
	}
	return h
}

// startInNamespaceOf runs the lockhelper on dir in the pid namespace of
// process pid, with this process's /proc (nsenter --pid, which forks
// the helper into it).
func startInNamespaceOf(t testing.TB, dir string, pid int, flags ...string) *proc {
	t.Helper()
	if out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot enter the pid namespace of %d (nsenter: %v: %s): the test needs nsenter(1) allowed to", pid, err, strings.TrimSpace(string(out)))
	}
	args := append([]string{"--target", strconv.Itoa(pid), "--pid", "--", helperBin, "-dir", dir}, flags...)
	p := startHelperCmd(t, exec.Command("nsenter", args...))
	// Killing nsenter would leave the helper it forked running, and its
	// output pipes open: kill the helper, then nsenter (the cleanups run
	// last first).
	helper := childOf(t, p.pid)
	t.Cleanup(func() {
		killChild(p.pid, helper)
		p.cmd.Wait() // nsenter reaps the helper and exits
	})
	return p
}

// startHelperCmd starts cmd, which runs the lockhelper, and waits for
// its "ready".
func startHelperCmd(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	cmd.Stderr = &unshareStderr{}
	// Bounds the wait for the output of processes the helper left
	// behind, should a cleanup miss one.
	cmd.WaitDelay = 5 * time.Second
	p := launch(t, cmd, 64)
	if l := p.read(); !strings.HasPrefix(l, "ready") {
		t.Fatalf("%s: %q", strings.Join(cmd.Args, " "), l)
	}
	return p
}

// childOf is the one child of process pid.
func childOf(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Skipf("cannot find the helper's pid (%v): the container tests need /proc/PID/task/TID/children", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("children of %d: %q", pid, b)
	}
	return child
}

// unshareStderr passes unshare's and the helper's stderr on, line by
// line, but for the line util-linux's unshare prints when it cannot
// raise the SIGKILL its forked child died of (it tries to unblock
// SIGKILL: EINVAL): die kills helpers so on purpose.
type unshareStderr struct {
	partial []byte // the start of a line not yet ended; os/exec copies what comes, as it comes
}

func (w *unshareStderr) Write(b []byte) (int, error) {
	w.partial = append(w.partial, b...)
	for {
		i := slices.Index(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := string(w.partial[:i+1]); !strings.Contains(line, "sigprocmask unblock failed") {
			os.Stderr.WriteString(line)
		}
		w.partial = w.partial[i+1:]
	}
}

// die kills the helper with SIGKILL and returns once it is gone: its
// descriptors are closed, so its holder file is unlocked.
func (h *nsHolder) die() {
	killChild(h.pid, h.helperPID)
	h.cmd.Wait() // unshare reaps a forked helper before it exits itself
}

// killChild sends SIGKILL to child if it is still a child of parent
// (whose children no one else reaps): a pid that parent reaped already
// may be another process's by now.
func killChild(parent, child int) {
	if parent != child {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			return
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) { // field 4, the parent
			return
		}
	}
	syscall.Kill(child, syscall.SIGKILL)
}

// TestContainerLiveHolder: a live holder in another pid namespace (its
// pid is 1 there; this process's /proc/1 is another process, of another
// start time) is never taken over nor swept, under any strategy.
func TestContainerLiveHolder(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		// outOfSight gives the judge a holders directory of its own: the
		// holder's file, in the store's, is out of its sight, so the
		// kernel cannot tell, and the pid is of another namespace.
		outOfSight bool
	}{
		{"kernel-first", []Option{WithStrategy(KernelFirst)}, false},
		{"kernel-first, holder file out of sight", []Option{WithStrategy(KernelFirst)}, true},
		{"pid-first", []Option{WithStrategy(PIDFirst)}, false},
		{"pid-first, stale after 1h", []Option{WithStrategy(PIDFirst), WithStaleAfter(time.Hour)}, false},
		{"pid-only", []Option{WithStrategy(PIDOnly)}, false},
		{"time-only, stale after 1h", []Option{WithStrategy(TimeOnly), WithStaleAfter(time.Hour)}, false},
	}
	for _, ns := range [][]string{{nsPID}, {nsPID, nsUTS}} {
		for _, tc := range tests {
			t.Run(strings.Join(ns, "+")+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				holder := startInNamespaces(t, dir, ns)
				tok := holder.token(holder.do("acquire job 10s"))
				opts := tc.opts
				if tc.outOfSight {
					opts = append(opts[:len(opts):len(opts)], WithHolderDir(t.TempDir()))
				}
				l := openLocker(t, dir, opts...)
				var le *LockedError
				h, err := l.TryAcquire("job")
				if err == nil {
					h.Release()
					t.Fatalf("took over the live holder (token %d) with token %d", tok, h.Token())
				}
				if !errors.As(err, &le) || len(le.Holders) != 1 {
					t.Fatalf("TryAcquire: %v, want a *LockedError naming one holder", err)
				}
				t.Logf("holder pid %d on %s (token %d): %s", le.Holders[0].PID, le.Holders[0].Host, le.Holders[0].Token, le.Holders[0].Reason)
				if rm, err := l.Sweep(testCtx(t)); err != nil || len(rm) != 0 {
					t.Fatalf("Sweep removed %d (%v), want none: %+v", len(rm), err, rm)
				}
				if l := holder.do("release"); l != "released" {
					t.Fatalf("the holder's release: %q", l)
				}
			})
		}
	}
}

// TestContainerDeadHolder: a holder that died under another hostname
// (same kernel, same boot id; its holder file unlocked) is taken over at
// once, and a sweep removes it and its holder file, under the strategies
// whose probes can tell on this kernel. One that died in another pid
// namespace is found dead by its holder file; the pid strategies cannot
// tell (its pid is of another namespace) and keep it.
func TestContainerDeadHolder(t *testing.T) {
	tests := []struct {
		ns       []string
		strategy Strategy
		dead     bool
	}{
		{[]string{nsUTS}, KernelFirst, true},
		{[]string{nsUTS}, PIDFirst, true},
		{[]string{nsUTS}, PIDOnly, true},
		{[]string{nsPID}, KernelFirst, true},
		{[]string{nsPID, nsUTS}, KernelFirst, true},
		{[]string{nsPID, nsUTS}, PIDFirst, false},
		{[]string{nsPID, nsUTS}, PIDOnly, false},
	}
	for _, tc := range tests {
		for _, op := range []string{"takeover", "sweep"} {
			t.Run(fmt.Sprintf("%s/%v/%s", strings.Join(tc.ns, "+"), tc.strategy, op), func(t *testing.T) {
				dir := t.TempDir()
				holder := startInNamespaces(t, dir, tc.ns, "-strategy", tc.strategy.String())
				tok := holder.token(holder.do("acquire job 10s"))
				l := openLocker(t, dir, WithStrategy(tc.strategy))
				list, err := l.List(testCtx(t))
				if err != nil || len(list) != 1 || !list[0].Alive {
					t.Fatalf("List while the holder lives: %+v, %v", list, err)
				}
				if slices.Contains(tc.ns, nsUTS) && list[0].Host != nsHostname {
					t.Fatalf("the holder's marker says host %q, want %q: the UTS namespace did not take", list[0].Host, nsHostname)
				}
				holder.die()
				switch op {
				case "takeover":
					h, err := l.TryAcquire("job")
					if !tc.dead {
						if !errors.Is(err, ErrLocked) {
							t.Fatalf("TryAcquire: %v, want ErrLocked: a pid of another namespace is no proof of death", err)
						}
						t.Logf("kept: %v", err)
						return
					}
					if err != nil {
						t.Fatalf("TryAcquire at once after the holder died: %v", err)
					}
					defer h.Release()
					if h.Token() <= tok {
						t.Fatalf("token %d after the dead holder's %d", h.Token(), tok)
					}
					t.Logf("taken over at once: token %d after %d", h.Token(), tok)
				case "sweep":
					rm, err := l.Sweep(testCtx(t))
					if err != nil {
						t.Fatal(err)
					}
					want := 0
					if tc.dead {
						want = 1
					}
					if len(rm) != want {
						t.Fatalf("Sweep removed %d holders (%+v), want %d", len(rm), rm, want)
					}
					files, _ := filepath.Glob(filepath.Join(dir, HolderDirName, "*"+holderSuffix))
					if tc.dead && len(files) != 0 {
						t.Fatalf("holder files left after the sweep: %q", files)
					}
					if want == 1 {
						t.Logf("swept: %s", rm[0].Reason)
					}
				}
			})
		}
	}
}

// TestContainerParentProc: two processes of one pid namespace whose
// /proc is the parent namespace's (unshare --pid without --mount-proc,
// then nsenter --pid), where /proc/1 is not their pid 1. The holder, pid
// 1 of the namespace, records its own start time, not that of the
// /proc/1 it sees; the acquirer, under the pid strategies, does not read
// that /proc/1 for the holder and cannot tell: the lock stays held.
func TestContainerParentProc(t *testing.T) {
	for _, st := range []Strategy{PIDFirst, PIDOnly} {
		t.Run(st.String(), func(t *testing.T) {
			dir := t.TempDir()
			holder := startInNamespaces(t, dir, []string{nsPIDParentProc}, "-strategy", st.String())
			tok := holder.token(holder.do("acquire job 10s"))
			_, start, err := procStat(holder.helperPID)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := slotOf(t, dir, "job", 0)
			if !ok {
				t.Fatal("no holder's key")
			}
			m, err := decodeMarker(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([2]uint64{1, start}, [2]uint64{uint64(m.PID), m.PIDStart}); diff != "" {
				t.Errorf("the holder's pid and start time (-want +got):\n%s", diff)
			}
			acq := startInNamespaceOf(t, dir, holder.helperPID, "-strategy", st.String())
			l := acq.do("try job")
			if !strings.HasPrefix(l, "locked") {
				t.Fatalf("an acquirer in the holder's pid namespace, with the parent's /proc: %q, want locked (holder's token %d)", l, tok)
			}
			t.Logf("%s", l)
		})
	}
}

// TestProcIsOwn reads NSpid from /proc/self/status texts.
func TestProcIsOwn(t *testing.T) {
	tests := []struct {
		name, status string
		own          bool
	}{
		{"own namespace", "Name:\tkv\nTgid:\t4711\nNSpid:\t4711\nNSpgid:\t4711\n", true},
		{"a namespace below /proc's", "Name:\tkv\nNSpid:\t4711\t1\n", false},
		{"two below", "NSpid:\t4711\t12\t1\n", false},
		{"no NSpid (Linux before 4.1)", "Name:\tkv\nTgid:\t4711\n", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		if got := procIsOwn(tc.status); got != tc.own {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.own)
		}
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	if procNamespace(pidNamespace()) == 0 && procIsOwn(string(b)) {
		t.Errorf("this process's /proc is its own, and procNamespace says 0")
	}
}

// forge is base with the marker fields of extra set or replaced, as a
// marker written by another process would decode: the fields go through
// the marker's encoding, by name.
func forge(t testing.TB, base Marker, extra map[string]any) Marker {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal(base.encode(), &fields); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		if v == nil {
			delete(fields, k)
		} else {
			fields[k] = v
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMarker(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMarkerNamespaceFields decodes markers from hand-built bytes: one
// of older code, without the namespace and directory fields (they decode
// as 0, unknown), and one with them, which encodes back to the same
// bytes.
func TestMarkerNamespaceFields(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	base := Marker{PID: 1, PIDStart: 4711, BootID: "b0", Host: "c1", Nonce: "n", HolderFile: "job.n.holder",
		Acquired: at, Renewed: at, Slots: 1, Strategy: "kernel-first"}
	withNS := base
	withNS.PIDNS, withNS.HolderDirDev, withNS.HolderDirIno = 4026532175, 65024, 9979663
	tests := []struct {
		name string
		raw  string
		want Marker
	}{
		{"older code", `{"pid":1,"pid_start":4711,"boot_id":"b0","host":"c1","nonce":"n","holder_file":"job.n.holder","acquired":"2025-01-02T03:04:05Z","renewed":"2025-01-02T03:04:05Z","slots":1,"strategy":"kernel-first"}`, base},
		{"namespace and directory", `{"pid":1,"pid_start":4711,"pid_ns":4026532175,"boot_id":"b0","host":"c1","nonce":"n","holder_file":"job.n.holder","holder_dir_dev":65024,"holder_dir_ino":9979663,"acquired":"2025-01-02T03:04:05Z","renewed":"2025-01-02T03:04:05Z","slots":1,"strategy":"kernel-first"}`, withNS},
	}
	for _, tc := range tests {
		got, err := decodeMarker([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: decoded (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.raw, string(got.encode())); diff != "" {
			t.Errorf("%s: encoded again (-want +got):\n%s", tc.name, diff)
		}
	}
	// A holder records its own pid namespace and holder directory.
	dir := t.TempDir()
	h := mustAcquire(t, openLocker(t, dir), "job")
	defer h.Release()
	var hd syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, HolderDirName), &hd); err != nil {
		t.Fatal(err)
	}
	m := h.Marker()
	got := [3]uint64{m.PIDNS, m.HolderDirDev, m.HolderDirIno}
	if diff := cmp.Diff([3]uint64{nsInode(t, "pid"), uint64(hd.Dev), hd.Ino}, got); diff != "" {
		t.Errorf("pid namespace, holder directory device and inode recorded (-want +got):\n%s", diff)
	}
}

// nsInode is the inode of this process's namespace of kind ("pid", "mnt").
func nsInode(t testing.TB, kind string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/"+kind, &st); err != nil {
		t.Skipf("no namespaces here: %v", err)
	}
	return st.Ino
}

// TestJudgeNamespaces crafts markers: a pid decides only in the pid
// namespace it was recorded in; a marker that records none (older code)
// is kept alive by a live pid, as before, but not found dead by a
// missing or reused one; a holder file is probed whatever the hostname
// on the same kernel, and only in the directory the holder made it in.
func TestJudgeNamespaces(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	ours := nsInode(t, "pid")
	other := ours + 1 // no namespace of ours: a container's
	var hd syscall.Stat_t
	openLocker(t, dir) // makes the store and its holders directory
	if err := syscall.Stat(filepath.Join(dir, HolderDirName), &hd); err != nil {
		t.Fatal(err)
	}
	// An unlocked holder file: its holder is gone.
	if err := os.WriteFile(filepath.Join(dir, HolderDirName, "x.holder"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	self := Marker{PID: os.Getpid(), PIDStart: selfStart(), BootID: bootID(), Host: host, Nonce: "n", Renewed: time.Now()}
	const noPID = 1 << 30
	type row struct {
		name  string
		extra map[string]any
	}
	rows := []row{
		{"this namespace, live", map[string]any{"pid_ns": ours}},
		{"this namespace, no such pid", map[string]any{"pid_ns": ours, "pid": noPID}},
		{"this namespace, pid reused", map[string]any{"pid_ns": ours, "pid_start": self.PIDStart + 1}},
		{"another namespace, no such pid", map[string]any{"pid_ns": other, "pid": noPID}},
		{"another namespace, pid reused", map[string]any{"pid_ns": other, "pid_start": self.PIDStart + 1}},
		{"another namespace, live pid", map[string]any{"pid_ns": other}},
		{"no namespace recorded, live", nil},
		{"no namespace recorded, no such pid", map[string]any{"pid": noPID}},
		{"no namespace recorded, another boot", map[string]any{"boot_id": "00000000-dead-beef-0000-000000000000"}},
		{"another hostname, same boot, live", map[string]any{"pid_ns": ours, "host": nsHostname}},
		{"another hostname, same boot, no such pid", map[string]any{"pid_ns": ours, "host": nsHostname, "pid": noPID}},
		{"another hostname, same boot, holder file unlocked", map[string]any{"pid_ns": other, "host": nsHostname, "holder_file": "x.holder"}},
		{"another hostname, another boot", map[string]any{"pid_ns": ours, "host": nsHostname, "pid": noPID, "boot_id": "00000000-dead-beef-0000-000000000000"}},
		{"holder file unlocked, in this directory", map[string]any{"pid_ns": other, "holder_file": "x.holder", "holder_dir_dev": uint64(hd.Dev), "holder_dir_ino": hd.Ino}},
		{"holder file unlocked, of another directory", map[string]any{"pid_ns": other, "holder_file": "x.holder", "holder_dir_dev": uint64(hd.Dev), "holder_dir_ino": hd.Ino + 1}},
	}
	// alive[row][strategy]
	want := map[string]map[Strategy]bool{}
	both := func(kf, pid bool) map[Strategy]bool {
		return map[Strategy]bool{KernelFirst: kf, PIDFirst: pid, PIDOnly: pid}
	}
	want["this namespace, live"] = both(true, true)
	want["this namespace, no such pid"] = both(false, false)
	want["this namespace, pid reused"] = both(false, false)
	want["another namespace, no such pid"] = both(true, true)
	want["another namespace, pid reused"] = both(true, true)
	want["another namespace, live pid"] = both(true, true)
	want["no namespace recorded, live"] = both(true, true)
	want["no namespace recorded, no such pid"] = both(true, true)
	want["no namespace recorded, another boot"] = both(false, false)
	want["another hostname, same boot, live"] = both(true, true)
	want["another hostname, same boot, no such pid"] = both(false, false)
	want["another hostname, same boot, holder file unlocked"] = both(false, true) // the pid strategies do not look at files
	want["another hostname, another boot"] = both(true, true)                     // another host: nothing tells
	want["holder file unlocked, in this directory"] = both(false, true)
	want["holder file unlocked, of another directory"] = both(true, true)

	got := map[string]map[Strategy]bool{}
	why := map[string]string{}
	for _, st := range []Strategy{KernelFirst, PIDFirst, PIDOnly} {
		l := openLocker(t, dir, WithStrategy(st))
		for _, r := range rows {
			m := forge(t, self, r.extra)
			alive, reason := l.judge(&m, time.Now())
			if got[r.name] == nil {
				got[r.name] = map[Strategy]bool{}
			}
			got[r.name][st] = alive
			why[fmt.Sprintf("%s/%v", r.name, st)] = reason
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		for k, v := range why {
			t.Logf("%s: %s", k, v)
		}
		t.Errorf("alive by row and strategy (-want +got):\n%s", diff)
	}
	// Time decides what the pid of another namespace cannot: PIDFirst
	// with a window, PIDOnly never.
	m := forge(t, self, map[string]any{"pid_ns": other, "pid": noPID})
	m.Renewed = time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		st    Strategy
		alive bool
	}{{PIDFirst, false}, {PIDOnly, true}} {
		l := openLocker(t, dir, WithStrategy(tc.st), WithStaleAfter(time.Minute))
		if alive, reason := l.judge(&m, time.Now()); alive != tc.alive {
			t.Errorf("%v, stale after 1m, renewed 1h ago, pid of another namespace: alive %v (%s), want %v", tc.st, alive, reason, tc.alive)
		}
	}
}

// testCtx bounds one test's store operations.
func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}
