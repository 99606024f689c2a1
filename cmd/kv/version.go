package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=..."; the
// module version from the build info is used otherwise.
var version = ""

// buildVersion is what "kv --version" prints after "kv version": the
// module version (a release tag, or the pseudo-version go build derives
// from the commit), then the module path, the VCS revision and its time,
// whether the checkout had local changes, and the Go version, as the
// binary's build information records them (runtime/debug.ReadBuildInfo).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	v := version
	if v == "" {
		v = "(devel)"
		if ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	var parts []string
	if ok && bi.Main.Path != "" {
		parts = append(parts, bi.Main.Path)
	}
	var rev, when, modified string
	if ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if rev == "" {
		parts = append(parts, "no VCS revision recorded")
	} else {
		r := "revision " + rev
		if when != "" {
			r += " of " + when
		}
		if modified == "true" {
			r += " with local changes"
		}
		parts = append(parts, r)
	}
	parts = append(parts, runtime.Version())
	return fmt.Sprintf("%s (%s)", v, strings.Join(parts, ", "))
}
