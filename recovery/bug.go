package recovery

import (
	"fmt"
	"strings"

	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/wal"
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
	// BugAckBeforeSync acknowledges a group of writes (and makes it
	// visible) after writing it and before its fdatasync.
	BugAckBeforeSync Bug = "ack-before-sync"
	// BugNoDirSync leaves out the directory fsync after a new segment is
	// created and after the snapshot's rename.
	BugNoDirSync Bug = "no-dirsync"
	// BugRenameBeforeFsync renames snapshot.tmp to snapshot before it
	// syncs it.
	BugRenameBeforeFsync Bug = "rename-before-fsync"
	// BugUnlinkEarly deletes the segments a checkpoint covers before the
	// snapshot that covers them is written.
	BugUnlinkEarly Bug = "unlink-early"
	// BugTrustTmp makes recovery load snapshot.tmp, renaming it into
	// place, instead of removing it.
	BugTrustTmp Bug = "trust-tmp"
	// BugTornAsCorrupt leaves a torn tail in place when recovery starts the
	// next segment, so that a crash before the checkpoint completes leaves
	// it in a segment that is no longer the newest, which the next recovery
	// refuses as corruption (cockroachdb/cockroach#68319).
	BugTornAsCorrupt Bug = "torn-as-corrupt"
	// BugRetrySync retries a failed fdatasync of the log and, when the
	// retry returns nil, acknowledges the writes as durable, instead of
	// failing them and stopping. After a failed fdatasync the kernel may
	// have dropped the dirty pages, so the retry "succeeds" without them
	// and acknowledged writes are lost (the fsync-failure model).
	BugRetrySync Bug = "retry-fsync"
)

// Bugs lists the known variants.
func Bugs() []Bug {
	return []Bug{BugDoubleApply, BugNoSync, BugAckBeforeSync, BugNoDirSync, BugRenameBeforeFsync,
		BugUnlinkEarly, BugTrustTmp, BugTornAsCorrupt, BugRetrySync}
}

// WAL returns o with the WAL options of the bug variant applied.
func (b Bug) WAL(o wal.Options) wal.Options {
	switch b {
	case BugNoDirSync:
		o.SkipDirSync = true
	case BugRetrySync:
		o.RetryFailedSync = true
	}
	return o
}

// Snapshot returns the snapshot options of the bug variant.
func (b Bug) Snapshot() snapshot.Options {
	var o snapshot.Options
	switch b {
	case BugNoDirSync:
		o.Publish.SkipDirSync = true
	case BugRenameBeforeFsync:
		o.Publish.RenameBeforeSync = true
	}
	return o
}

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
