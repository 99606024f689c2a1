package kv

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
)

// SyncMode says when a write is acknowledged relative to its fdatasync.
type SyncMode struct {
	kind     syncKind
	interval time.Duration
}

type syncKind int

const (
	syncAlways syncKind = iota
	syncInterval
	syncNever
)

// Always acknowledges a write only after its record is durable (the
// default). Concurrent writers share one write and one fdatasync.
var Always = SyncMode{}

// Never acknowledges writes once they are written to the page cache and
// leaves syncing to Close, Sync and checkpoints, and to the watch
// history: when the changes it holds for watchers, which it publishes
// only once durable, outgrow WatchHistoryBytes, the store syncs (about
// one fdatasync per 4 MiB of changes, by default). A power loss can take
// back acknowledged writes; a process crash cannot.
var Never = SyncMode{kind: syncNever}

// Interval acknowledges a write before it is durable and syncs the log
// every d in the background. A power loss can take back the writes of the
// last d; a process crash cannot. Reads may see writes that are not yet
// durable, so a revision read under Interval is not a safe fencing token
// until the next sync.
func Interval(d time.Duration) SyncMode { return SyncMode{kind: syncInterval, interval: d} }

// String names the mode.
func (m SyncMode) String() string {
	switch m.kind {
	case syncInterval:
		return fmt.Sprintf("interval(%v)", m.interval)
	case syncNever:
		return "never"
	}
	return "always"
}

// Defaults for Options.
const (
	DefaultCheckpointBytes = 64 << 20
	DefaultMaxKeySize      = 64 << 10
	DefaultMaxValueSize    = 4 << 20
	// DefaultWatchHistoryBytes bounds the watch history (see Store.Watch).
	DefaultWatchHistoryBytes = 4 << 20
	// DefaultLogRetention is the log kept behind each checkpoint for
	// watchers in other processes (see Options.LogRetention).
	DefaultLogRetention = 4 << 20
	// DefaultCloseCheckpointBytes is the log since the last checkpoint
	// past which Close writes one (see Options.CloseCheckpointBytes).
	DefaultCloseCheckpointBytes = 4 << 20
)

// Options configure a Store. The zero value is valid: the OS file system,
// 64 MiB segments, a checkpoint every 64 MiB of log, Always.
type Options struct {
	// FS is the file system; nil means vfs.OS.
	FS vfs.FS
	// FileMode is the permission of the files the store creates (log
	// segments, snapshots, LOCK) on the OS file system, before the umask;
	// 0 means 0600, readable by the owner only. It applies when FS is nil;
	// a caller's FS decides for itself.
	FileMode os.FileMode
	// DirMode is the permission of the data directory (and any missing
	// parents) when Open creates it, before the umask; 0 means 0700.
	DirMode os.FileMode
	// SegmentSize is the size past which a WAL segment is sealed and the
	// next started; 0 means 64 MiB.
	SegmentSize int64
	// CheckpointBytes starts a background checkpoint when this many bytes
	// were logged since the last snapshot; 0 means 64 MiB, negative never,
	// not even after a recovery that replayed a long log (Checkpoint still
	// works).
	CheckpointBytes int64
	// CloseCheckpointBytes makes Close write a checkpoint when at least
	// this many bytes were logged since the last one (the log an open
	// replayed counts), so that the next open maps the image and replays
	// almost nothing instead of the whole tail. 0 means 4 MiB
	// (DefaultCloseCheckpointBytes), negative never; when CheckpointBytes
	// is negative, 0 means never too. Such a Close takes as long as a
	// checkpoint, which writes every key: on the machine of
	// bench/results, about a second for a million keys of 116 bytes. A
	// store that only read (its writer never started) writes nothing at
	// Close, and a checkpoint that fails there loses nothing: the log is
	// synced and kept, and Close still succeeds.
	CloseCheckpointBytes int64
	// Sync is when writes are acknowledged; the zero value is Always.
	Sync SyncMode
	// MaxKeySize and MaxValueSize bound keys and values; 0 means the
	// defaults (64 KiB and 4 MiB).
	MaxKeySize   int
	MaxValueSize int
	// NoPreallocate turns off the preallocation of log space ahead of the
	// writer (on by default: the log reserves 1 MiB at a time and writes
	// zeros over it, so that an fdatasync of records written there
	// flushes data alone, not the file size or the file system's extents).
	// The reservation never takes more than half the free space the file
	// system reports, and gives way to the records when the disk is full,
	// so it does not make a small disk full early; turn it off where the
	// file system allocates on every write anyway (copy-on-write ones).
	NoPreallocate bool
	// NoCreate makes Open refuse, with an error matching ErrNoStore, a
	// directory that holds no store (missing, or empty), instead of
	// creating a store there. Set it wherever a mistyped path must not
	// become a new, empty store: a command that reads, or a program that
	// expects its data to be there. A directory that holds other files
	// is refused either way (ErrNotDataDir).
	NoCreate bool
	// ReadOnly recovers in memory and changes no byte of any file; every
	// write returns ErrReadOnly. It takes the directory's lock, shared,
	// only while it vouches for records no writer claimed synced, and so
	// keeps no writer out; it shows only what is durable:
	//
	// Beside a live writer (which holds the lock: a read-only open goes
	// on without it), the records that a later record claims synced:
	// every write the writer acknowledged, but for its last group until
	// it marks the log, a millisecond after it went idle (or at
	// Store.Sync).
	//
	// With no live writer (a writer crashed or was killed), every record
	// of the log: the ones past the dead writer's last mark are made
	// durable by an fdatasync of their segment and an fsync of the
	// directory, which change no byte, and are checked to read back the
	// same past the page cache (FORMAT.md, "Reading beside a writer").
	// Where it cannot vouch for them so (the fdatasync fails, or a failed
	// write-back left bytes in the cache that are not on disk) it leaves
	// them out, and Stats says how many (RecoveryUnvouched) and why.
	//
	// Either way a read never shows what a power loss could take back.
	ReadOnly bool
	// WatchHistoryBytes bounds the changes the store keeps in memory for
	// Store.Watch: each costs its key, value and previous value plus about
	// 100 bytes. A watch from a revision older than the history, or one
	// that falls behind it, ends with ErrCompacted. Under Never and
	// Interval, changes wait in it until a sync makes them durable; once
	// they outgrow it, the store syncs (see Never). 0 means 4 MiB (about
	// 20,000 changes of 100-byte values).
	WatchHistoryBytes int64
	// LogRetention is the log, in bytes, that a checkpoint keeps behind
	// the snapshot for watchers in other processes (WatchDir, kv DIR
	// watch), as the in-process watch keeps WatchHistoryBytes: the newest
	// segments the snapshot covers stay while the ones kept add up to less
	// than it, so at least this much of the log before the checkpoint
	// stays, in whole segments (up to one segment more). A watcher that
	// has read the log up to within this many bytes of the writer's
	// position at a checkpoint goes on past it. Covered segments are
	// never read by recovery. 0 means DefaultLogRetention (4 MiB);
	// negative keeps none.
	LogRetention int64
	// VerifyImage makes a writer's Open read and check every block of the
	// snapshot's image before it writes anything (an open may seal or
	// rotate the log): damage anywhere in the image then fails Open with
	// every file as it was, rather than the first read of the damaged
	// block after the open. It costs a read of the whole image, which a
	// caller that reads every key anyway (kv DIR dump) pays once more.
	VerifyImage bool
	// WaitForLock makes Open wait while another process holds the lock,
	// until the context given to OpenContext ends.
	WaitForLock bool
	// Logger receives the few events worth logging: the recovery summary,
	// checkpoints, a fail-stop. nil discards them.
	Logger *slog.Logger
	// Clock is the time that lease deadlines are set by and read against
	// (see Grant); nil means the system's wall clock.
	Clock Clock
}

// preallocStep is how far ahead of the writer log space is reserved, at
// most.
const preallocStep = 1 << 20

func (o *Options) fs() vfs.FS {
	switch {
	case o.FS != nil:
		return o.FS
	case o.FileMode != 0:
		return vfs.NewOS(o.FileMode)
	}
	return vfs.OS
}

func (o *Options) dirMode() os.FileMode {
	if o.DirMode == 0 {
		return 0o700
	}
	return o.DirMode & os.ModePerm
}

func (o *Options) maxKey() int {
	if o.MaxKeySize <= 0 {
		return DefaultMaxKeySize
	}
	return o.MaxKeySize
}

func (o *Options) maxValue() int {
	if o.MaxValueSize <= 0 {
		return DefaultMaxValueSize
	}
	return o.MaxValueSize
}

func (o *Options) checkpointBytes() int64 {
	if o.CheckpointBytes == 0 {
		return DefaultCheckpointBytes
	}
	return o.CheckpointBytes
}

func (o *Options) closeCheckpointBytes() int64 {
	switch {
	case o.CloseCheckpointBytes < 0:
		return 0
	case o.CloseCheckpointBytes > 0:
		return o.CloseCheckpointBytes
	case o.CheckpointBytes < 0:
		return 0
	}
	return DefaultCloseCheckpointBytes
}

func (o *Options) logRetention() int64 {
	switch {
	case o.LogRetention < 0:
		return 0
	case o.LogRetention == 0:
		return DefaultLogRetention
	}
	return o.LogRetention
}

func (o *Options) watchHistoryBytes() int64 {
	if o.WatchHistoryBytes <= 0 {
		return DefaultWatchHistoryBytes
	}
	return o.WatchHistoryBytes
}

func (o *Options) walOptions() wal.Options {
	w := wal.Options{SegmentSize: o.SegmentSize}
	// A record holds a key and a value and some framing; transactions may
	// hold more, up to the WAL's own limit.
	w.MaxRecordSize = max(wal.DefaultMaxRecordSize, 2*(o.maxKey()+o.maxValue())+1024)
	if !o.NoPreallocate {
		w.Preallocate = preallocStep
		if o.SegmentSize > 0 {
			// A segment takes at least four steps, so that reservations
			// happen part way through one, as they do every MiB of the
			// default 64 MiB segments, also in the small segments of
			// the crash checkers.
			w.Preallocate = min(preallocStep, max(o.SegmentSize/4, wal.SectorSize))
		}
	}
	return w
}

func (o *Options) clock() Clock {
	if o.Clock == nil {
		return systemClock{}
	}
	return o.Clock
}

func (o *Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
