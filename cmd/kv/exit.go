package main

// Exit codes of kv besides 0. A command run under "kv DIR lock" exits
// with its own status, which kv passes on; the codes below are kv's
// own.
const (
	// exitFailed: the command failed (a store error, a lock kv could
	// not take for a reason other than a holder: a corrupt store).
	exitFailed = 1
	// exitUsage: the command line is wrong.
	exitUsage = 2
	// exitInternal: kv panicked, a bug of its own.
	exitInternal = 3
	// exitFenced: a write under --fence NAME:TOKEN was refused because
	// the token is not the lock's current one; nothing was written.
	exitFenced = 4
	// exitLockLost: the command under "kv DIR lock" succeeded, but the
	// lock was taken over while it ran (its release found another
	// holder's key, which it left alone).
	exitLockLost = 5
	// exitTempFail (EX_TEMPFAIL of sysexits.h): "kv DIR lock --wait D"
	// ran out of time while the lock was held.
	exitTempFail = 75
	// exitCannotRun and exitNotFound: the command under "kv DIR lock"
	// could not be started, as a shell says it.
	exitCannotRun = 126
	exitNotFound  = 127
	// exitSignaled plus the signal's number: "kv DIR lock --wait D" was
	// interrupted by that signal while it waited, as a shell reports a
	// command the signal ended.
	exitSignaled = 128
)
