package vfs

import (
	"os"
	"path"
	"syscall"
)

// SpaceFS is implemented by a file system that can say how much space is
// left for new data: the OS file system (statfs), a MemFS given a
// capacity, and the test wrappers, which pass the question on.
type SpaceFS interface {
	// FreeSpace returns the bytes an unprivileged writer may still
	// allocate on the file system holding dir. It is a snapshot: other
	// writers change it at any time, so a caller still handles ENOSPC.
	FreeSpace(dir string) (int64, error)
}

// FreeSpace asks fsys how much space is free on the file system holding
// dir, and reports false when it cannot tell (it does not implement
// SpaceFS, or the call failed): the caller then assumes there is room.
func FreeSpace(fsys FS, dir string) (int64, bool) {
	s, ok := fsys.(SpaceFS)
	if !ok {
		return 0, false
	}
	n, err := s.FreeSpace(dir)
	return n, err == nil && n >= 0
}

// FreeSpace implements SpaceFS with statfs(2), where the platform has it.
func (osFS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }

// SetCapacity makes the file system hold at most n bytes of file data (the
// sum of the files' sizes) from now on: a write, a preallocation or a
// truncate that would grow past it fails with ENOSPC and changes nothing,
// as a full disk's fallocate does. n <= 0 means no limit (the default).
// It is how tests fill a disk.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = n
}

// FreeSpace implements SpaceFS: the capacity less the bytes the files
// hold, or an error matching ErrUnsupported when there is no capacity.
func (m *MemFS) FreeSpace(string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capacity <= 0 {
		return 0, &os.PathError{Op: "statfs", Path: "/", Err: syscall.ENOTSUP}
	}
	return max(0, m.capacity-m.used()), nil
}

// Used returns the bytes the files hold: what SetCapacity bounds.
func (m *MemFS) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used()
}

// used returns the bytes the files hold. m.mu is held.
func (m *MemFS) used() int64 {
	seen := map[*inode]bool{}
	var sum func(n *inode) int64
	sum = func(n *inode) int64 {
		if seen[n] {
			return 0
		}
		seen[n] = true
		t := int64(len(n.data))
		for _, c := range n.entries {
			t += sum(c)
		}
		return t
	}
	return sum(m.root)
}

// room returns an ENOSPC error for an operation on name that grows the
// file system's data by grow bytes past its capacity, or nil. m.mu is
// held.
func (m *MemFS) room(op, name string, grow int64) error {
	if m.capacity <= 0 || grow <= 0 || m.used()+grow <= m.capacity {
		return nil
	}
	return &os.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
}

// FreeSpace implements SpaceFS: the wrapped file system's answer, unless
// Rule fails an OpStatfs of dir.
func (in *Inject) FreeSpace(dir string) (int64, error) {
	if err := in.check(OpStatfs, dir); err != nil {
		return 0, err
	}
	if s, ok := in.FS.(SpaceFS); ok {
		return s.FreeSpace(dir)
	}
	return 0, &os.PathError{Op: "statfs", Path: path.Clean(dir), Err: syscall.ENOTSUP}
}

// FreeSpace implements SpaceFS: the recorded file system's answer. It is
// not an event: it changes nothing.
func (r *Recorder) FreeSpace(dir string) (int64, error) {
	if s, ok := r.FS.(SpaceFS); ok {
		return s.FreeSpace(dir)
	}
	return 0, &os.PathError{Op: "statfs", Path: path.Clean(dir), Err: syscall.ENOTSUP}
}
