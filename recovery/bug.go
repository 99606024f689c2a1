package recovery

import (
	"fmt"
	"strings"
)

// Bug names a deliberate defect, off by default, that tests switch on to
// show that the checkers catch it. More variants join this list as the
// checkers that need them are built.
type Bug string

// Bug variants.
const (
	// NoBug is the correct store.
	NoBug Bug = ""
	// BugDoubleApply writes 0 as the covered segment in every snapshot, so
	// that recovery replays every segment it finds on top of the snapshot,
	// as in the article. Recovery under this bug also trusts that marker
	// the way the article's store does: it skips the checks of segment
	// numbering and revision continuity that would otherwise refuse such a
	// directory as corrupt. A crash between the snapshot's rename and the
	// deletion of the segments it covers then applies them twice.
	BugDoubleApply Bug = "double-apply"
	// BugNoSync makes the store acknowledge writes without syncing the
	// log, as if the default sync mode were Never: a power loss takes
	// back acknowledged writes.
	BugNoSync Bug = "no-sync"
)

// Bugs lists the known variants.
func Bugs() []Bug { return []Bug{BugDoubleApply, BugNoSync} }

// ParseBug returns the variant named s; "" and "none" mean NoBug.
func ParseBug(s string) (Bug, error) {
	if s == "" || s == "none" {
		return NoBug, nil
	}
	for _, b := range Bugs() {
		if string(b) == s {
			return b, nil
		}
	}
	names := make([]string, 0, len(Bugs()))
	for _, b := range Bugs() {
		names = append(names, string(b))
	}
	return NoBug, fmt.Errorf("recovery: unknown bug variant %q (known: %s)", s, strings.Join(names, ", "))
}
