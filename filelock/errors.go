package filelock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvstore/kv/filelock/lockstore"
	"github.com/kvstore/kv/kv"
)

// ErrLocked is returned by TryAcquire, and by Acquire when its context
// ends, while every slot of the lock has a live holder. The error is a
// *LockedError naming the holders.
var ErrLocked = errors.New("filelock: lock is held")

// ErrLockLost is returned by Release and Extend when the lock key no
// longer has the holder's token as its create revision: another process
// took the lock over (it judged this holder dead), or swept it. Release
// then deletes nothing.
var ErrLockLost = errors.New("filelock: lock lost to another holder")

// ErrSlotsMismatch is returned when a lock is held by holders that asked
// for another number of slots (WithSlots) than the caller. The error is a
// *SlotsError.
var ErrSlotsMismatch = errors.New("filelock: lock held with another number of slots")

// ErrNetworkFS is returned by Open and New when the holder files would
// live on a network file system (NFS, SMB/CIFS, Ceph, AFS, 9P, or a FUSE
// network file system such as sshfs), where kernel locks and fsync
// promise less, or nothing, across hosts.
var ErrNetworkFS = errors.New("filelock: refusing a network file system")

// ErrInvalid is returned for a bad lock name or a bad combination of
// options (TimeOnly without a stale-after window, a slot count below 1).
var ErrInvalid = errors.New("filelock: invalid argument")

// ErrFenced is returned by a fenced write whose token is no longer the
// lock's: nothing was written. Errors that match it also match
// kv.ErrFenced.
var ErrFenced = lockstore.ErrFenced

// ErrReleased is returned by the methods of a Holder after Release.
var ErrReleased = errors.New("filelock: holder already released")

// LockedError is the error of an attempt that found every slot held. It
// matches ErrLocked.
type LockedError struct {
	Name    string
	Holders []Info // one per slot, with the verdict that kept it
	// Waiting is the number of live waiters queued before the caller,
	// which go first.
	Waiting int
}

// Error names the holders.
func (e *LockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "filelock: lock %q is held", e.Name)
	for i, h := range e.Holders {
		sep := " by "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%spid %d on %s (token %d, %s)", sep, h.PID, h.Host, h.Token, h.Reason)
	}
	if e.Waiting > 0 {
		fmt.Fprintf(&b, "; %d waiting ahead", e.Waiting)
	}
	return b.String()
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// SlotsError is the error of a caller whose slot count differs from the
// live holders'. It matches ErrSlotsMismatch.
type SlotsError struct {
	Name       string
	Want, Have int
}

// Error says both counts.
func (e *SlotsError) Error() string {
	return fmt.Sprintf("filelock: lock %q is held with %d slot(s), asked for %d", e.Name, e.Have, e.Want)
}

// Unwrap returns ErrSlotsMismatch.
func (e *SlotsError) Unwrap() error { return ErrSlotsMismatch }

// FencedError is the error of a fenced write whose token is stale. It
// matches ErrFenced (lockstore.ErrFenced) and kv.ErrFenced.
type FencedError struct {
	Name  string
	Token int64
	Err   error // the store's error, if it gave one
}

// Error says which lock and token.
func (e *FencedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("filelock: lock %q: token %d is stale: %v", e.Name, e.Token, e.Err)
	}
	return fmt.Sprintf("filelock: lock %q: token %d is stale", e.Name, e.Token)
}

// Is matches ErrFenced and kv.ErrFenced.
func (e *FencedError) Is(target error) bool {
	return target == lockstore.ErrFenced || target == kv.ErrFenced
}

// Unwrap returns the store's error.
func (e *FencedError) Unwrap() error { return e.Err }
