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
	// whatever became of its pid and whatever the clocks say. A marker of
	// another boot of this host is dead. When the kernel cannot tell (no
	// holder file, or another host), it falls back to PIDFirst.
	KernelFirst Strategy = iota
	// PIDFirst probes the holder's pid: no such process, a zombie, another
	// start time (the pid was reused) or another boot id mean dead; when
	// that cannot tell (another host, no start time), the stale-after
	// window decides, and without one the lock stays held.
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
	if m.Host == l.host {
		if m.BootID != "" && l.boot != "" && m.BootID != l.boot {
			return dead, fmt.Sprintf("boot %s is over", shortID(m.BootID))
		}
		if l.opts.strategy == KernelFirst && m.HolderFile != "" {
			v, w := probeHolderFile(filepath.Join(l.holderDir, m.HolderFile))
			if v != unknown {
				return v, w
			}
			why = w
		}
		v, w := probePID(m.PID, m.PIDStart)
		if v != unknown {
			return v, w
		}
		why = join(why, w)
	} else {
		why = fmt.Sprintf("held on host %s", m.Host)
	}
	if l.opts.strategy == PIDOnly {
		return alive, join(why, "cannot tell; pid-only keeps it")
	}
	return l.byTime(m, now, why)
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
