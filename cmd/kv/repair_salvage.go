package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
)

// salvageJSON is what repair --salvage --json adds.
type salvageJSON struct {
	// Touched counts the keys the dropped records and keys touch, whose
	// salvaged values the restore keeps.
	Touched  int      `json:"touched"`
	Restored int      `json:"restored"`
	Puts     int      `json:"puts"`
	First    uint64   `json:"first_revision,omitempty"`
	Deletes  int      `json:"deletes"`
	Revision uint64   `json:"revision,omitempty"`
	Lost     []string `json:"lost"`
}

// touchedKeys returns the keys that what plan drops touches: the keys of
// the operations of every record dropped and of every snapshot entry set
// aside. Only these can differ between the salvage and the repaired store
// (beside the keys of unreadable ranges, which neither holds).
func touchedKeys(plan *recovery.RepairPlan) map[string]bool {
	keys := map[string]bool{}
	for _, d := range plan.Dropped {
		for _, op := range d.Record.Ops {
			keys[string(op.Key)] = true
		}
	}
	for _, e := range plan.DroppedEntries {
		keys[string(e.Entry.Key)] = true
	}
	return keys
}

// printSalvagePlan says what --salvage would keep of what the plan drops,
// and what stays lost.
func printSalvagePlan(w io.Writer, plan *recovery.RepairPlan, rep *recovery.SalvageReport, out *salvageJSON) {
	keys := touchedKeys(plan)
	live := 0
	for k := range keys {
		if _, ok := rep.Map.Get([]byte(k)); ok {
			live++
		}
	}
	out.Touched = len(keys)
	fmt.Fprintf(w, "salvage: read %s past the damage; after the repair it writes the final values of the %s the dropped records and keys touch, where they differ (%d hold a value, %d are deleted), in one transaction: never the records again\n",
		kvcli.Plural(rep.Map.Len(), "key"), kvcli.Plural(len(keys), "key"), live, len(keys)-live)
	for _, l := range out.Lost {
		fmt.Fprintf(w, "salvage: lost: %s\n", l)
	}
}

// restoreSalvaged opens the repaired store in dir, under the lock the
// repair holds (lock), and writes the salvaged map's final values where
// they differ (kv.Store.RestoreSalvaged).
func restoreSalvaged(g *globalOpts, dir string, lock vfs.File, m *record.Map) (kv.Restored, kv.Revision, error) {
	opts, err := g.storeOptions(false)
	if err != nil {
		return kv.Restored{}, 0, err
	}
	opts.NoCreate = true
	// Any value the log held: the largest a record holds by default.
	opts.MaxValueSize = maxValueFlag
	base := opts.FS
	if base == nil {
		base = vfs.OS
	}
	opts.FS = heldLockFS{FS: base, name: path.Join(dir, kv.LockName), lock: lock}
	s, err := kv.Open(dir, opts)
	if err != nil {
		return kv.Restored{}, 0, err
	}
	rev := s.Revision()
	r, err := s.RestoreSalvaged(m)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return r, rev, err
}

// heldLockFS is a file system whose exclusive lock of name is lock, held
// already: the store the repair opens takes it without letting it go in
// between, so that no writer comes between the repair and the restore.
type heldLockFS struct {
	vfs.FS
	name string
	lock vfs.File
}

func (h heldLockFS) Lock(name string, exclusive bool) (vfs.File, error) {
	if name == h.name && exclusive {
		return heldLock{h.lock}, nil
	}
	return h.FS.Lock(name, exclusive)
}

// heldLock is the held lock; its Close leaves it held, for the repair to
// let go.
type heldLock struct{ vfs.File }

func (heldLock) Close() error { return nil }

// evidenceNames names the evidence files of every step of plan.
func evidenceNames(plan *recovery.RepairPlan) string {
	var names []string
	for _, e := range plan.Evidence {
		names = append(names, e.To)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// salvageFileName is where repair --salvage --yes saves what it salvaged
// before it changes anything: beside the directory, so that a repair that
// stops part way, or a restore that fails, loses none of it.
func salvageFileName(dir string) string { return filepath.Clean(dir) + ".salvaged" }

// saveSalvage writes m as a backup file (FORMAT.md, "Backup": the
// snapshot format, covering no segment) at name, published as a snapshot
// is (tmp, fdatasync, rename, directory fsync). A name that exists is
// refused: it holds the salvage of an earlier repair that did not finish.
func saveSalvage(name string, m *record.Map) error {
	if _, err := vfs.OS.Stat(name); err == nil {
		return fmt.Errorf("%s exists: an earlier 'repair --salvage --yes' saved its salvage there and did not finish; write it with 'kv DIR repair --salvage-from %s --yes', or move it away (nothing was changed)", name, name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	rev := m.Revision()
	for e := range m.All(nil, nil) {
		rev = max(rev, e.ModRev)
	}
	meta := snapshot.Meta{Revision: rev, Count: uint64(m.Len())}
	if err := vfs.Publish(vfs.OS, filepath.Dir(name), filepath.Base(name), func(w io.Writer) error {
		return snapshot.Encode(w, meta, m.All(nil, nil))
	}); err != nil {
		return fmt.Errorf("saving the salvage in %s: %w (nothing was changed)", name, err)
	}
	return nil
}

// loadSalvage reads a salvage file (any backup file) back into a map.
func loadSalvage(name string) (*record.Map, error) {
	m := record.NewMap()
	d, err := kv.ReadBackup(name, nil, func(e kv.Entry) error {
		m.Load(&e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.SetRevision(d.Revision)
	return m, nil
}

// dropSalvage removes a salvage file once its keys are written, durably.
func dropSalvage(name string) error {
	if err := vfs.OS.Remove(name); err != nil {
		return err
	}
	return vfs.SyncDir(vfs.OS, filepath.Dir(name))
}
