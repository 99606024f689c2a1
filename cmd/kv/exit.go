package main

import "github.com/kvstore/kv/internal/kvcli"

// Exit codes of kv besides 0: kvcli's, the same on a data directory and
// on etcd (kv --etcd). A command run under "kv DIR lock" exits with its
// own status, which kv passes on; the codes below are kv's own.
const (
	// exitFailed: the command failed (a store error, a lock kv could
	// not take for a reason other than a holder: a corrupt store).
	exitFailed = kvcli.ExitFailed
	// exitUsage: the command line is wrong.
	exitUsage = kvcli.ExitUsage
	// exitInternal: kv panicked, a bug of its own.
	exitInternal = kvcli.ExitInternal
	// exitFenced: a write under --fence NAME:TOKEN was refused because
	// the token is not the lock's current one; nothing was written.
	exitFenced = kvcli.ExitFenced
	// exitPartial: "kv DIR dump --read-only" left out records it could
	// not vouch durable, with no writer alive.
	exitPartial = kvcli.ExitPartial
	// exitNoKey: what the command was asked to read is not there (get
	// of a missing key), as grep's 1 says "no match".
	exitNoKey = kvcli.ExitNoKey
	// exitDiffers: "kv DIR verify --against FILE" found the store and
	// the backup different, as diff's 1 says.
	exitDiffers = kvcli.ExitDiffers
	// exitTempFail (EX_TEMPFAIL of sysexits.h): "kv DIR lock --wait D"
	// ran out of time while the lock was held.
	exitTempFail = kvcli.ExitTempFail
	// exitSignaled plus the signal's number: "kv DIR lock --wait D" was
	// interrupted by that signal while it waited, as a shell reports a
	// command the signal ended.
	exitSignaled = kvcli.ExitSignaled
)
