package runinfo

import (
	"runtime/debug"
	"testing"
)

// TestRevision: a stamped build names its own commit, short, dirty when
// its tree had changes; an unstamped one (go run, go test, or
// -buildvcs=false) names none, and commit falls back to the checkout.
func TestRevision(t *testing.T) {
	const full = "2d99a7907f350de7f6302baf9fb2dbc3b9a997a3"
	for _, c := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: full}, {Key: "vcs.modified", Value: "false"}}, "2d99a7907f35"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: full}}, "2d99a7907f35+dirty"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, "abc"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, ""},
		{nil, ""},
	} {
		if got := revision(c.settings); got != c.want {
			t.Errorf("revision(%v) = %q, want %q", c.settings, got, c.want)
		}
	}
}
