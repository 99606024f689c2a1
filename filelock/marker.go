package filelock

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KeyPrefix starts every key the lock library writes in the store:
// KeyPrefix+NAME+"/slots" holds the slot count of lock NAME, and
// KeyPrefix+NAME+"/slot/"+I the marker of the holder of slot I, whose
// create revision is that holder's fencing token.
const KeyPrefix = "filelock/"

// Files in the holder directory.
const (
	holderSuffix = ".holder"
	tmpSuffix    = ".tmp"
	// HolderDirName is the holder files' directory inside the data
	// directory. The store ignores it.
	HolderDirName = "holders"
)

func namePrefix(name string) string     { return KeyPrefix + name + "/" }
func slotsKey(name string) string       { return KeyPrefix + name + "/slots" }
func slotPrefix(name string) string     { return KeyPrefix + name + "/slot/" }
func slotKey(name string, i int) string { return slotPrefix(name) + strconv.Itoa(i) }

// parseSlotKey splits a slot key into the lock's name and the slot.
func parseSlotKey(key string) (name string, slot int, ok bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", 0, false
	}
	name, s, ok := strings.Cut(rest, "/slot/")
	if !ok {
		return "", 0, false
	}
	slot, err := strconv.Atoi(s)
	if err != nil || slot < 0 || CheckName(name) != nil {
		return "", 0, false
	}
	return name, slot, true
}

// maxNameLen bounds a lock name, which is also part of a file name.
const maxNameLen = 128

// CheckName reports whether name can name a lock: 1 to 128 letters,
// digits, '.', '_' and '-', not starting with '.' (a lock's name is also
// part of a file name). Its error matches ErrInvalid. Acquire and
// TryAcquire check it; a tool that takes a lock's name from a user can
// check it first, with the same words.
func CheckName(name string) error {
	if name == "" || len(name) > maxNameLen || name[0] == '.' {
		return fmt.Errorf("%w: lock name %q: 1 to %d of [A-Za-z0-9._-], not starting with '.'", ErrInvalid, name, maxNameLen)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: lock name %q: 1 to %d of [A-Za-z0-9._-], not starting with '.'", ErrInvalid, name, maxNameLen)
		}
	}
	return nil
}

// Marker is what a holder records in its slot key, for the judges of
// its liveness and for people: who holds it, since when, and how to
// prove it dead.
//
// One host is one kernel, named by BootID; Host is the hostname, which
// containers on one kernel may each set to their own. A field a marker
// lacks (one written by older code) decodes as its zero value: unknown.
type Marker struct {
	PID      int    `json:"pid"`       // in the pid namespace PIDNS
	PIDStart uint64 `json:"pid_start"` // field 22 of /proc/PID/stat: clock ticks after boot
	// PIDNS is the inode of the holder's pid namespace
	// (/proc/self/ns/pid), of which PID is a pid: a probe of PID is
	// evidence only to a judge whose /proc shows that namespace, since
	// the same number is another process, or none, in another (a
	// container's holder is often pid 1). 0 if unknown: then a probe
	// that finds PID alive keeps the holder, as before, and one that
	// finds it gone or reused proves nothing.
	PIDNS  uint64 `json:"pid_ns,omitempty"`
	BootID string `json:"boot_id"` // /proc/sys/kernel/random/boot_id
	Host   string `json:"host"`
	Nonce  string `json:"nonce"`
	// HolderFile is the base name of the holder file in the holder
	// directory, locked with flock for as long as the holder lives;
	// empty for a holder that keeps no descriptor.
	HolderFile string `json:"holder_file,omitempty"`
	// HolderDirDev and HolderDirIno are the device and inode of the
	// directory the holder made its holder file in (stat(2) st_dev and
	// st_ino): a judge probes the file only if its own holder directory
	// is that one, whatever path or mount namespace it reaches it by.
	// 0 if unknown (older code): the file is probed by its name, which
	// the nonce makes unique, as before.
	HolderDirDev uint64 `json:"holder_dir_dev,omitempty"`
	HolderDirIno uint64 `json:"holder_dir_ino,omitempty"`
	// Lease is the backend lease the key is bound to under the Lease
	// strategy (lockstore.Leaser); 0 for none.
	Lease      int64     `json:"lease,omitempty"`
	Acquired   time.Time `json:"acquired"`
	Renewed    time.Time `json:"renewed"` // the last Extend (Acquired before one)
	Slots      int       `json:"slots"`
	Strategy   string    `json:"strategy"`
	StaleAfter string    `json:"stale_after,omitempty"`
}

func (m *Marker) encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

func decodeMarker(b []byte) (Marker, error) {
	var m Marker
	err := json.Unmarshal(b, &m)
	return m, err
}

func newNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
