package killtest

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"
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

// dump is a map in the CLI's key=value form, one line per key.
func dump(s *kv.Store) string {
	var b strings.Builder
	for e := range s.Scan(nil, nil) {
		fmt.Fprintf(&b, "%q=%q\n", e.Key, e.Value)
	}
	return b.String()
}

// parseDump turns a dump back into a map.
func parseDump(d string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		if line == "" {
			continue
		}
		var k, v string
		fmt.Sscanf(line, "%q=%q", &k, &v)
		m[k] = v
	}
	return m
}

// DescribeDiff words the difference between two maps as the article
// does: "c=110 instead of 55, d=14 instead of 7".
func DescribeDiff(want, got map[string]string) string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var parts []string
	for _, k := range sorted {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case wok && gok && w != g:
			parts = append(parts, fmt.Sprintf("%s=%s instead of %s", k, g, w))
		case wok && !gok:
			parts = append(parts, fmt.Sprintf("%s missing (want %s)", k, w))
		case !wok && gok:
			parts = append(parts, fmt.Sprintf("%s=%s should not exist", k, g))
		}
	}
	if len(parts) == 0 {
		return "same map"
	}
	return strings.Join(parts, ", ")
}

// mapDiff is a go-cmp diff of two dumps.
func mapDiff(want, got string) string {
	return cmp.Diff(parseDump(want), parseDump(got))
}
