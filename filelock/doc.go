// Package filelock is a lock library for many processes on one host,
// whose state lives in the kv store: holders, their markers, and fencing
// tokens that never go backwards.
//
// # Guarantees
//
//   - Exclusion. Acquiring, and taking over a dead holder, is one store
//     transaction each, with compares on the slot key's revisions: of any
//     number of processes racing for a slot, exactly one wins.
//   - Fencing tokens. Holder.Token is the revision of the transaction that
//     granted the lock (the slot key's create revision). The store's
//     revisions never go backwards, across crashes and repairs, so a token
//     is larger than every token handed out before. A fenced write
//     (Holder.Txn, Locker.Fenced, kv.Store.Fenced with StoreFence) commits
//     only while its token is current, in the same atomic step; a holder
//     that was taken over can write nothing.
//   - Safe release. Release and Extend commit only while the slot key has
//     the holder's token, else ErrLockLost: a holder that was taken over
//     never deletes its successor's lock. Sweep removes each dead holder
//     under a compare on the revision it judged.
//   - Liveness from the kernel. Each holder keeps an exclusive flock on a
//     holder file (DIR/holders/NAME.NONCE.holder) while it holds; a probe
//     that gets a shared lock on it proves the holder gone: no PID reuse,
//     no clocks. The probe runs wherever the kernel is the same (the same
//     boot id), whatever the hostname. Markers also record pid, its pid
//     namespace, start time (/proc/PID/stat field 22), boot id, host,
//     nonce and the holder directory's device and inode, for people and
//     for the PID and time strategies.
//   - Waits without polling. Acquire sleeps until the kernel reports a
//     holder file closed or unlinked (inotify) or the holder's stale time
//     comes. Waiters queue in the store, each watching the waiter ahead,
//     so that a release wakes one process and waiters are served in
//     their order of arrival.
//   - Durability. Every state change is a store transaction, durable when
//     it returns; nothing lives only in a file that was not fsynced. A
//     corrupt store fails closed: no lock is granted until `kv DIR
//     repair`, which never lets revisions, and so tokens, go backwards.
//
// # Across hosts: leases
//
// On a backend that has leases (lockstore.Leaser: the etcd module's
// etcdlock, on an etcd cluster; StoreLeaser, the kv store's own leases
// in a process that keeps it open) holders are judged by the Lease
// strategy instead: each Locker keeps a lease of the backend alive, its
// holders' keys are bound to it, and the backend deletes them when the
// lease ends (the process died, paused or lost the cluster for the
// lease's TTL). No pid, kernel lock or clock is consulted; a paused
// holder that wakes up after its lease ended is kept out by its fence
// (kv.ErrFenced) and learns it through Lost and ErrLockLost.
//
// # One host, and containers
//
// One host is one kernel: the same boot id (/proc/sys/kernel/random/boot_id,
// which containers share with their host). Processes in containers on one
// kernel that share the data directory (a bind mount or a volume) share
// its locks, whatever their hostnames and mount namespaces:
//
//   - A holder file's kernel lock is proof across them, when the judge's
//     holder directory is the holder's (the marker records it by device
//     and inode; the same directory by another path is the same).
//     Under KernelFirst a dead holder of any container on this kernel is
//     taken over at once, and Sweep removes it.
//   - A pid is evidence only in the pid namespace the marker records, read
//     in a /proc of that namespace: a container's holder is often pid 1,
//     and /proc/1 outside is init. Where the namespace differs (or a
//     marker of older code records none, and the pid is gone or reused
//     here) the probe cannot tell: PIDFirst falls back to the stale-after
//     window, PIDOnly keeps the lock. A live holder in another container
//     is never taken over by its pid; a dead one is taken over by its
//     holder file (KernelFirst), by time, or not at all.
//   - Containers on another kernel (a virtual machine, gVisor) are other
//     hosts: nothing but time tells.
//
// # What it cannot promise
//
// On the kv store, one host and local file systems: kernel locks and
// boot ids mean nothing across hosts, and Open refuses NFS, SMB/CIFS and
// other network file systems it can detect. A holder judged by time (TimeOnly, or the
// stale-after fallback) that is only paused past its window is taken
// over while it still runs: only fenced writes keep it out. Under a
// store sync mode other than kv.Always, a power loss can take back a
// token.
//
// # Crash contract
//
// A holder's process dying, however it dies, frees its slot at once: the
// kernel drops its flock, the next acquirer's probe finds the file
// unlocked and takes over with a larger token. A crash of the process
// that has the store open loses nothing acknowledged; an acquire that
// did not return may or may not have taken the slot, and its holder file
// is then unlocked, so its slot is free to the next acquirer. After a
// power loss every marker is of another boot: dead, if it bears this
// host's hostname. A marker of a container that set a hostname of its own
// cannot be told from another host's once the boot is over: the
// stale-after window decides, or it stays held until its key is deleted.
//
// # Usage
//
//	l, err := filelock.Open("data")              // each operation opens and closes the store
//	h, err := l.Acquire(ctx, "shard-7")          // waits; TryAcquire fails fast with ErrLocked
//	defer h.Release()                            // ErrLockLost if taken over
//	_, err = h.Put(ctx, "shard-7/state", v)      // fenced: ErrFenced once the lock is lost
//	token := h.Token()                           // hand it to other consumers
//
// A process that keeps the store open uses New(store) instead. The lock
// logic sees the store only through lockstore.Backend, which the etcd
// module implements too (etcdlock.NewLocker); package locktest is the
// acceptance suite both run.
package filelock
