package variant

import (
	"fmt"
	"strings"
)

// Bug names a deliberate defect; None is the correct store.
type Bug string

// The bug variants.
const (
	// None is the correct store.
	None Bug = ""
	// DoubleApply writes 0 as the covered segment in every snapshot, so
	// that recovery replays every segment it finds on top of the snapshot,
	// as in the article "Recovery Code Must Survive a Crash Too". Recovery
	// under it also trusts that marker the way the article's store does:
	// it skips the checks of segment numbering and revision continuity
	// that would otherwise refuse such a directory. A crash between the
	// snapshot's rename and the deletion of the segments it covers then
	// applies them twice.
	DoubleApply Bug = "double-apply"
	// NoSync acknowledges writes without syncing the log: the wrapper
	// leaves out every fdatasync of a log segment whose last write was a
	// commit's records (not a segment header or a seal).
	NoSync Bug = "no-sync"
	// AckBeforeSync acknowledges a group of writes (and makes it visible)
	// after writing it and before its fdatasync.
	AckBeforeSync Bug = "ack-before-sync"
	// NoDirSync leaves out every directory fsync: after a new segment is
	// created, after the snapshot's rename.
	NoDirSync Bug = "no-dirsync"
	// RenameBeforeFsync renames snapshot.tmp to snapshot before it syncs
	// it: the wrapper holds the sync of a file named *.tmp back until the
	// file is renamed.
	RenameBeforeFsync Bug = "rename-before-fsync"
	// UnlinkEarly deletes the segments a checkpoint covers before the
	// snapshot that covers them is written.
	UnlinkEarly Bug = "unlink-early"
	// TrustTmp makes recovery load snapshot.tmp, renaming it into place,
	// instead of removing it.
	TrustTmp Bug = "trust-tmp"
	// TornAsCorrupt leaves a torn tail in place when recovery starts the
	// next segment, so that a crash before the checkpoint completes leaves
	// it in a segment that is no longer the newest, which the next
	// recovery refuses as corruption (cockroachdb/cockroach#68319).
	TornAsCorrupt Bug = "torn-as-corrupt"
	// RetrySync retries a failed fdatasync of the log once and, when the
	// retry returns nil, goes on as if the records were durable. After a
	// failed fdatasync the kernel may have dropped the dirty pages, so the
	// retry "succeeds" without them and acknowledged writes are lost.
	RetrySync Bug = "retry-fsync"
	// LeaseGrace gives every lease a fresh TTL when the store opens (its
	// deadline becomes the open's time plus its TTL, in memory, as
	// etcd's new leader does), instead of keeping the deadline the log
	// holds: a restart moves deadlines, and keys outlive the deadline
	// their holder was last given.
	LeaseGrace Bug = "lease-grace"
	// BackupLive makes Store.Backup read the live map a key at a time,
	// under the lock for each, instead of the copy-on-write view taken at
	// one revision, and label the file with the revision it finds at the
	// end: writes that land during the backup leave a valid file that is
	// not the map at its revision.
	BackupLive Bug = "backup-live"
)

// All lists the variants, in the order docs/crash-testing.md's table gives them.
func All() []Bug {
	return []Bug{DoubleApply, NoSync, AckBeforeSync, NoDirSync, RenameBeforeFsync,
		UnlinkEarly, TrustTmp, TornAsCorrupt, RetrySync, LeaseGrace, BackupLive}
}

// Parse returns the variant named s; "" and "none" mean None. A
// kvrelease build has no variants and refuses every other name.
func Parse(s string) (Bug, error) {
	if s == "" || s == "none" {
		return None, nil
	}
	if !Enabled {
		return None, fmt.Errorf("bug variant %q: this build has none (built with -tags kvrelease)", s)
	}
	for _, b := range All() {
		if string(b) == s {
			return b, nil
		}
	}
	names := make([]string, 0, len(All()))
	for _, b := range All() {
		names = append(names, string(b))
	}
	return None, fmt.Errorf("unknown bug variant %q (known: %s)", s, strings.Join(names, ", "))
}
