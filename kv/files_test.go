package kv_test

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// dirFiles returns every file of dir but LOCK (which an open rewrites with
// its pid) with its contents.
func dirFiles(tb testing.TB, fsys vfs.FS, dir string) map[string]string {
	tb.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		if n == kv.LockName {
			continue
		}
		b, err := vfs.ReadFile(fsys, path.Join(dir, n))
		if err != nil {
			tb.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// diffFiles describes how two listings of files differ, or returns "".
func diffFiles(before, after map[string]string) string {
	var d []string
	for n, b := range before {
		a, ok := after[n]
		switch {
		case !ok:
			d = append(d, n+" removed")
		case a != b:
			d = append(d, fmt.Sprintf("%s changed (%d -> %d bytes)", n, len(b), len(a)))
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			d = append(d, n+" created")
		}
	}
	slices.Sort(d)
	return strings.Join(d, ", ")
}
