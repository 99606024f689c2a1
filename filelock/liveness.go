package filelock

import (
	"fmt"
	"path/filepath"
	"time"
)

// Strategy says how an acquirer judges whether a holder is alive.
type Strategy int

const (
	// KernelFirst, the default, asks the kernel: a holder keeps an
	// exclusive flock on its holder file for as long as it holds, and a
	// probe that can take a shared lock on that file proves it gone,
	// whatever became of its pid and whatever the clocks say. The probe
	// runs wherever the kernel is the same (the same boot id), whatever
	// the hostname: a container on this kernel is on this host, though
	// it may set a hostname of its own. A marker of another boot under
	// this hostname is dead. When the kernel cannot tell (no holder
	// file, one in a directory this Locker does not see, or another
	// kernel), it falls back to PIDFirst.
	KernelFirst Strategy = iota
	// PIDFirst probes the holder's pid: no such process, a zombie, another
	// start time (the pid was reused) or another boot id mean dead. A pid
	// is evidence only in the pid namespace the marker records, read in a
	// /proc of that namespace: a container's holder is pid 1 of its own,
	// and /proc/1 here is another process. When the probe cannot tell
	// (another host or pid namespace, no start time, or a pid gone or
	// reused in a marker of older code that records no namespace), the
	// stale-after window decides, and without one the lock stays held.
	PIDFirst
	// PIDOnly is PIDFirst that never looks at the time: what the probe
	// cannot tell stays held.
	PIDOnly
	// TimeOnly judges by time alone: a holder that has not renewed its
	// marker (Holder.Extend) for the stale-after window is dead. For
	// holders that cannot keep a descriptor open; a holder that is only
	// slow or paused past the window is taken over, and fencing tokens
	// are what keeps its late writes out.
	TimeOnly
	// Lease, the default on a backend that has leases
	// (lockstore.Leaser: etcd), binds each holder's slot key to a lease
	// of the backend that the Locker keeps alive: the store deletes the
	// key when the lease ends, so a key that exists has a live holder,
	// on any host. A holder that dies, pauses or loses the network for
	// longer than the lease's TTL loses its key; fenced writes are what
	// keeps a paused holder's late writes out. No holder files.
	Lease
)

var strategyNames = []string{"kernel-first", "pid-first", "pid-only", "time-only", "lease"}

// String is the strategy's name as ParseStrategy reads it.
func (s Strategy) String() string {
	if int(s) < len(strategyNames) && s >= 0 {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy reads kernel-first, pid-first, pid-only, time-only or
// lease.
func ParseStrategy(s string) (Strategy, error) {
	for i, n := range strategyNames {
		if s == n {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: strategy %q is not one of kernel-first, pid-first, pid-only, time-only, lease", ErrInvalid, s)
}

type verdict int

const (
	unknown verdict = iota
	alive
	dead
)

// judge decides whether the holder of m is alive, and says why.
func (l *Locker) judge(m *Marker, now time.Time) (bool, string) {
	v, why := l.probe(m, now)
	return v != dead, why
}

// probe judges m by the strategy's evidence. One host is one kernel
// (one boot id): a kernel lock is evidence wherever the kernel is the
// same, whatever the hostname (containers set their own); a pid only in
// the pid namespace it is a pid of (probeProcess). A marker of another
// kernel is dead if it is of this hostname (this host, booted since),
// and otherwise of another host, on which nothing here can tell.
func (l *Locker) probe(m *Marker, now time.Time) (verdict, string) {
	if m.Lease != 0 {
		// Only a Leaser backend takes a leased put, and it deletes the
		// key when the lease ends: the key, read just now, is the proof.
		return alive, fmt.Sprintf("bound to lease %x, which ends when its holder stops renewing it", m.Lease)
	}
	if l.opts.strategy == TimeOnly {
		return l.byTime(m, now, "")
	}
	var why string
	switch {
	case l.sameKernel(m):
		if l.opts.strategy == KernelFirst && m.HolderFile != "" {
			path, w := l.holderFileOf(m)
			if path != "" {
				var v verdict
				if v, w = probeHolderFile(path); v != unknown {
					return v, w
				}
			}
			why = w
		}
		v, w := l.probeProcess(m)
		if v != unknown {
			return v, w
		}
		why = join(why, w)
	case m.Host == l.host:
		return dead, fmt.Sprintf("boot %s is over", shortID(m.BootID))
	default:
		why = fmt.Sprintf("held on host %s", m.Host)
	}
	if l.opts.strategy == PIDOnly {
		return alive, join(why, "cannot tell; pid-only keeps it")
	}
	return l.byTime(m, now, why)
}

// sameKernel reports whether the holder of m runs on this kernel: the
// same boot id. Where either boot id is unknown (a platform without
// one), the same hostname is all there is to go on, as before boot ids.
func (l *Locker) sameKernel(m *Marker) bool {
	if m.BootID != "" && l.boot != "" {
		return m.BootID == l.boot
	}
	return m.Host == l.host
}

// holderFileOf is the path of m's holder file if its kernel lock speaks
// for m's holder here: the holder keeps one, on this kernel, in this
// Locker's holder directory (the one it recorded, by device and inode,
// or, in a marker of older code that recorded none, the one its unique
// name is found in). Otherwise "", and why not.
func (l *Locker) holderFileOf(m *Marker) (path, why string) {
	switch {
	case !kernelLocks || l.holderDir == "":
		return "", "no holder files here"
	case m.HolderFile == "":
		return "", "no holder file"
	case !l.sameKernel(m):
		return "", "holder file on another kernel"
	}
	if m.HolderDirIno != 0 {
		if dev, ino := dirID(l.holderDir); dev != m.HolderDirDev || ino != m.HolderDirIno {
			return "", fmt.Sprintf("holder file in directory %d:%d, not this one (%d:%d)", m.HolderDirDev, m.HolderDirIno, dev, ino)
		}
	}
	return filepath.Join(l.holderDir, m.HolderFile), ""
}

// seesHolderFile reports whether m's holder file is this Locker's to
// watch and, once its holder is judged dead, to remove.
func (l *Locker) seesHolderFile(m *Marker) bool {
	path, _ := l.holderFileOf(m)
	return path != ""
}

// probeProcess probes m's pid where that is evidence: in the pid
// namespace m recorded, when /proc shows that namespace. In another, the
// pid is another process or none (a container's holder is often pid 1,
// and /proc/1 here is init): it cannot tell. A marker of older code
// recorded no namespace: a live pid of the right start time keeps it, as
// before (only a process of that pid and start tick, here, could fool
// that, and the error keeps a lock held, which is safe), but a pid that
// is gone or reused here proves nothing, since the holder may live in a
// namespace of its own. Such a holder is judged as the strategy judges
// what it cannot tell: by the stale-after window, or it stays held.
func (l *Locker) probeProcess(m *Marker) (verdict, string) {
	switch {
	case m.PIDNS == 0:
		v, why := probePID(m.PID, m.PIDStart)
		if v == dead {
			return unknown, why + ", but the marker names no pid namespace: no proof of death"
		}
		return v, why
	case l.procNS == 0:
		return unknown, fmt.Sprintf("pid %d is of pid namespace %d, and /proc here shows another than this process's", m.PID, m.PIDNS)
	case m.PIDNS != l.procNS:
		return unknown, fmt.Sprintf("pid %d is of another pid namespace (%d, this one is %d)", m.PID, m.PIDNS, l.procNS)
	}
	return probePID(m.PID, m.PIDStart)
}

func (l *Locker) byTime(m *Marker, now time.Time, why string) (verdict, string) {
	d := l.opts.staleAfter
	if d <= 0 {
		return alive, join(why, "cannot tell, and no stale-after window")
	}
	age := now.Sub(m.Renewed)
	if age > d {
		return dead, join(why, fmt.Sprintf("not renewed for %v (stale after %v)", age.Round(time.Millisecond), d))
	}
	return alive, join(why, fmt.Sprintf("renewed %v ago (stale after %v)", age.Round(time.Millisecond), d))
}

// staleAt is when the holder of m becomes stale by time, if time can
// decide at all.
func (l *Locker) staleAt(m *Marker) (time.Time, bool) {
	if l.opts.staleAfter <= 0 || l.opts.strategy == PIDOnly {
		return time.Time{}, false
	}
	return m.Renewed.Add(l.opts.staleAfter), true
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
