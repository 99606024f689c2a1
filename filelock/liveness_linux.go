package filelock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelLocks reports that this platform keeps holder files locked with
// flock, so that a probe can prove a holder dead.
const kernelLocks = true

// createHolderFile creates dir/base, locked exclusively with flock, for
// as long as the returned file (or a process it is passed to) stays
// open. It is made under a temporary name, locked, then renamed, so that
// no one ever sees the final name unlocked while its holder lives. It is
// never synced: after a crash of the machine the boot id says its holder
// is gone, and after a crash of the process the kernel has let go.
func createHolderFile(dir, base string, content []byte) (*os.File, error) {
	final := filepath.Join(dir, base)
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		// A sweep found it unlocked and took it: it will unlink it.
		return nil, fmt.Errorf("filelock: lock %s: %w", tmp, err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	// The rename publishes the name under which markers point at the
	// file; it need not be durable (see above).
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// probeHolderFile tells whether the holder file at path is still locked
// by its holder. A shared, non-blocking flock that succeeds proves that
// no process holds the exclusive lock: the holder, and every process it
// passed the descriptor to, is gone. The kernel drops the lock at the
// last close, however the process ended, so neither PID reuse nor clocks
// come into it.
func probeHolderFile(path string) (verdict, string) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return unknown, "holder file missing"
	}
	if err != nil {
		return unknown, fmt.Sprintf("holder file: %v", err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	switch {
	case err == nil:
		return dead, "holder file unlocked: no process holds it"
	case errors.Is(err, unix.EWOULDBLOCK):
		return alive, "holder file locked"
	}
	return unknown, fmt.Sprintf("holder file: flock: %v", err)
}

// takeHolderFile locks the holder file at path exclusively if no one
// holds it, for a sweep that then removes it; the caller closes the file.
func takeHolderFile(path string) (*os.File, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// procStat returns the state (field 3) and start time (field 22, clock
// ticks since boot) of process pid from /proc/PID/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	return readStat("/proc/" + strconv.Itoa(pid) + "/stat")
}

func readStat(path string) (state byte, start uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses itself: the fields that follow start after the
	// last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("%s: no ')'", path)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("%s: %d fields", path, len(f)+2)
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22
	if err != nil {
		return 0, 0, fmt.Errorf("%s: start time: %w", path, err)
	}
	return f[0][0], start, nil
}

// selfStart is this process's start time from /proc/self/stat, which is
// this process whatever pid namespace /proc shows (/proc/GETPID is
// another process where /proc is not of this process's namespace).
func selfStart() uint64 {
	_, start, err := readStat("/proc/self/stat")
	if err != nil {
		return 0
	}
	return start
}

// pidNamespace is the inode of this process's pid namespace, the one
// os.Getpid's number belongs to, or 0 if unknown. Namespace inodes are
// unique among the namespaces that exist on one kernel (the boot id
// tells the kernel). A new namespace may get the number of one that is
// gone, and every process of it with it: a judge in the new one that
// probes the pid of a marker of the old finds it gone (right) or, with
// the same pid and start tick, alive (wrong, but the lock stays held).
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

// procNamespace is the pid namespace whose pids /proc shows, if it is
// own (this process's, pidNamespace), and otherwise 0: a process whose
// /proc was mounted in another namespace (unshare --pid without
// --mount-proc, nsenter --pid, a container given the host's /proc)
// reads there other processes than its pids name.
func procNamespace(own uint64) uint64 {
	if own == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil || !procIsOwn(string(b)) {
		return 0
	}
	return own
}

// procIsOwn reports whether status, a /proc/self/status, says that /proc
// shows this process's own pid namespace: its NSpid lists the process's
// pid in each namespace from /proc's own down to the process's, so one
// entry means they are the same. Without NSpid (Linux before 4.1) it
// cannot tell, and says no.
func procIsOwn(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(rest)) == 1
		}
	}
	return false
}

// dirID is the device and inode of directory dir, or zeros if it cannot
// be read.
func dirID(dir string) (dev, ino uint64) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, 0
	}
	return uint64(st.Dev), st.Ino
}

// probePID tells whether process pid, started at start, lives: a
// process of that pid must exist, not be a zombie, and have the same
// start time (else the pid was reused by another process).
func probePID(pid int, start uint64) (verdict, string) {
	if pid <= 0 {
		return unknown, "no pid recorded"
	}
	state, got, err := procStat(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return dead, fmt.Sprintf("no process %d", pid)
	}
	if err != nil {
		return unknown, err.Error()
	}
	if state == 'Z' || state == 'X' {
		return dead, fmt.Sprintf("process %d has exited", pid)
	}
	if start == 0 {
		return unknown, fmt.Sprintf("process %d lives, but no start time was recorded", pid)
	}
	if got != start {
		return dead, fmt.Sprintf("pid %d reused: started at tick %d, the holder at %d", pid, got, start)
	}
	return alive, fmt.Sprintf("process %d lives", pid)
}

// bootID is the kernel's id of this boot, or "" if unknown.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Magic numbers of statfs(2)'s f_type for network file systems.
var networkFS = map[int64]string{
	0x6969:     "NFS",
	0x517B:     "SMB",
	0xFF534D42: "CIFS",
	0xFE534D42: "SMB2",
	0x00C36400: "Ceph",
	0x5346414F: "AFS",
	0x6B414653: "AFS",
	0x73757245: "Coda",
	0x564C:     "NCP",
	0x01021997: "9P",
	0x13661366: "Lustre",
	0x0BD00BD0: "Lustre",
	0x47504653: "GPFS",
	0x19830326: "FhGFS",
}

// networkFUSE are FUSE subtypes (the fstype "fuse.NAME" in mountinfo)
// that reach another host.
var networkFUSE = []string{"sshfs", "glusterfs", "s3fs", "rclone", "gcsfuse", "juicefs", "ceph-fuse", "cephfs", "davfs", "goofys", "lizardfs", "moosefs", "mfs", "beegfs", "seaweedfs", "nfs"}

const fuseMagic = 0x65735546

// checkLocalFS refuses a directory on a network file system.
func checkLocalFS(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return classifyFS(dir, int64(st.Type)&0xFFFFFFFF, fuseSubtype)
}

// classifyFS refuses the file system of type t (statfs's f_type) if it
// is a network one; subtype finds a FUSE mount's subtype.
func classifyFS(dir string, t int64, subtype func(string) string) error {
	if name, ok := networkFS[t]; ok {
		return fmt.Errorf("%w: %s is on %s (statfs type %#x): kernel locks and fsync do not hold across hosts there", ErrNetworkFS, dir, name, t)
	}
	if t == fuseMagic {
		if sub := subtype(dir); sub != "" {
			for _, n := range networkFUSE {
				if sub == n {
					return fmt.Errorf("%w: %s is on FUSE %s, a network file system", ErrNetworkFS, dir, sub)
				}
			}
		}
	}
	return nil
}

// fuseSubtype finds the mount of dir in /proc/self/mountinfo and returns
// the subtype of its "fuse.NAME" file system type.
func fuseSubtype(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	best, fstype := -1, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		mp := unescapeMount(fields[4])
		if !(abs == mp || mp == "/" || strings.HasPrefix(abs, mp+"/")) || len(mp) <= best {
			continue
		}
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				best, fstype = len(mp), fields[i+1]
				break
			}
		}
	}
	sub, ok := strings.CutPrefix(fstype, "fuse.")
	if !ok {
		return ""
	}
	return sub
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
