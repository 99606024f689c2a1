package crashsim

import (
	"path"
	"strings"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// memFS builds an in-memory file system holding state in dir, all durable.
func memFS(dir string, s State) (*vfs.MemFS, error) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, name := range s.Names() {
		f, err := fsys.Create(path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(s[name], 0); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		f.Close()
	}
	return fsys, vfs.SyncDir(fsys, dir)
}

// readState returns the files of dir in fsys, but the lock file.
func readState(fsys vfs.FS, dir string) (State, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	s := State{}
	for _, n := range names {
		if n == kv.LockName {
			continue
		}
		b, err := vfs.ReadFile(fsys, path.Join(dir, n))
		if err != nil {
			return nil, err
		}
		s[n] = b
	}
	return s, nil
}

// initialNames lists the paths of s's files as NewRecorder wants them.
func initialNames(dir string, s State) []string {
	var out []string
	for _, n := range s.Names() {
		out = append(out, path.Join(dir, n))
	}
	return out
}

// dump is the store's map as kv dump prints it.
func dump(s *kv.Store) string {
	var b strings.Builder
	for e := range s.Scan(nil, nil) {
		b.WriteString(opmodel.DumpLine(e.Key, e.Value))
	}
	b.WriteString(dumpLeases(s)) // nothing when no lease is live
	return b.String()
}

// describe words how the map of the dump got differs from want's.
func describe(want, got string) string {
	w, err := opmodel.ParseDump(want)
	if err != nil {
		return err.Error()
	}
	g, err := opmodel.ParseDump(got)
	if err != nil {
		return err.Error()
	}
	return opmodel.Describe(w, g)
}

// mapDiff is a diff of the maps of two dumps.
func mapDiff(want, got string) string {
	w, _ := opmodel.ParseDump(want)
	g, _ := opmodel.ParseDump(got)
	return opmodel.Diff(w, g)
}
