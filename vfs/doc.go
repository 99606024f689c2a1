// Package vfs is the only code in kv that touches the operating system's
// files. Everything above it reads, writes, syncs, renames and deletes
// through the FS interface, so that every call can be recorded, faulted or
// crashed in tests.
//
// # Guarantees
//
// Every method's documentation says what it makes durable. In short:
// File.Sync makes a file's data (and size) durable with fdatasync and
// never its name; syncing a directory (OpenDir, then Sync; or SyncDir)
// makes the creates, renames and removes inside it durable. Nothing else
// is durable.
//
// # Crash contract
//
// Publish is the one way the store publishes a whole file: write a fresh
// tmp file, sync it, rename it over the target, sync the directory. After
// a crash at any point the target holds its old or its new contents.
//
// # Implementations
//
// OS is the host file system, built on golang.org/x/sys/unix (Fdatasync,
// Fsync, Flock, Fallocate, O_CLOEXEC). The calls only Linux has live in
// os_linux.go, with portable twins in os_other.go for other Unix systems
// (fsync for fdatasync, no fallocate, no read-ahead hint): the durability
// described here is Linux's, and only there is it crash-tested. Its
// errors are *os.PathError values that name the file and wrap the errno,
// so errors.Is works. Open and OpenReadWrite open regular files only
// (O_NOFOLLOW, O_NONBLOCK, then fstat): a symbolic link, directory, FIFO,
// socket or device is ErrNotRegular. NewMem returns an in-memory file
// system that keeps current and durable contents apart: Clone gives the
// state a process crash leaves, CrashClone the state a power loss leaves
// when nothing unsynced survives.
//
// Map gives a read-only view of a file: a memory mapping (mmap, shared,
// read-only) of an OS file, or a copy read through ReadAt on any other
// File, the wrappers included, so that faults injected on reads reach
// the readers of a view too. A fault on a mapped page (a disk error, a
// file cut short under the mapping) raises SIGBUS; Mapping.CatchFault
// turns it into an error matching ErrMapFault.
//
// # Usage
//
//	f, err := vfs.OS.Create("/data/log.000001")
//	...
//	_, err = f.WriteAt(b, 0)
//	err = f.Sync()                       // data durable
//	err = vfs.SyncDir(vfs.OS, "/data")   // name durable
package vfs
