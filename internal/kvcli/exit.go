package kvcli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvstore/kv/kv"
)

// Exit codes of kv besides 0, on a data directory and on etcd alike. A
// command run under "kv lock" exits with its own status, which kv
// passes on; the codes below are kv's own.
const (
	// ExitFailed: the command failed (a store error, a missing key, a
	// lock kv could not take for a reason other than a holder).
	ExitFailed = 1
	// ExitUsage: the command line is wrong, or names a backend that
	// cannot be used (kv-etcd not installed).
	ExitUsage = 2
	// ExitInternal: kv panicked, a bug of its own.
	ExitInternal = 3
	// ExitFenced: a write under --fence NAME:TOKEN was refused because
	// the token is not the lock's current one; nothing was written.
	ExitFenced = 4
	// ExitLockLost: the command under "kv lock" succeeded, but the lock
	// was taken over while it ran (its release found another holder's
	// key, which it left alone).
	ExitLockLost = 5
	// ExitPartial: "kv DIR dump --read-only" printed the store but left
	// out records it could not vouch durable with no writer alive (it
	// said how many, and why, on stderr); "kv DIR dump" recovers them.
	ExitPartial = 6
	// ExitNoKey: what the command was asked to read is not there (get of
	// a missing key), as grep's 1 says "no match": not a failure of
	// the store.
	ExitNoKey = 7
	// ExitDiffers: "kv DIR verify --against FILE" found the store and
	// the backup different, as diff's 1 says: both were read whole.
	ExitDiffers = 8
	// ExitTempFail (EX_TEMPFAIL of sysexits.h): the store is locked by
	// another writer, or "kv lock --wait D" ran out of time.
	ExitTempFail = 75
	// ExitCannotRun and ExitNotFound: the command under "kv lock" could
	// not be started, as a shell says it.
	ExitCannotRun = 126
	ExitNotFound  = 127
	// ExitSignaled plus the signal's number: "kv lock --wait D" was
	// interrupted by that signal while it waited, as a shell reports a
	// command the signal ended.
	ExitSignaled = 128
)

// UsageError is a mistake in the command line: ExitUsage, and a hint to
// run --help.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef formats a UsageError.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// ExitError ends a command with Code after it printed its own report;
// Msg, if not empty, is the one line kv prints on stderr.
type ExitError struct {
	Code int
	Msg  string
	Err  error // the error it reports, if any, for errors.Is
}

func (e ExitError) Error() string { return e.Msg }
func (e ExitError) Unwrap() error { return e.Err }

// Code is the exit code of a command that failed with err (not nil):
// ExitUsage for a UsageError, an ExitError's code, ExitFailed for
// anything else.
func Code(err error) int {
	var ue UsageError
	var ex ExitError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ex):
		return ex.Code
	}
	return ExitFailed
}

// Trim is err's text without the prefixes "kv: " that would repeat the
// one kv prints before every message.
func Trim(err error) string {
	s := err.Error()
	for strings.HasPrefix(s, "kv: ") {
		s = s[4:]
	}
	return strings.ReplaceAll(s, ": kv: ", ": ")
}

// keyNotFound is a missing key as the user reads it: the key quoted, so
// that an empty key shows as "". It still matches kv.ErrNotFound.
type keyNotFound struct {
	key []byte
	err error
}

func (e keyNotFound) Error() string { return fmt.Sprintf("key %q not found", e.key) }
func (e keyNotFound) Unwrap() error { return e.err }

// KeyError words a failed operation on key: a missing key as `key "K"
// not found` with ExitNoKey (the key asked for is not there, as grep's 1
// says "no match"), any other error as it is. The error still matches
// kv.ErrNotFound.
func KeyError(key []byte, err error) error {
	if errors.Is(err, kv.ErrNotFound) {
		nf := keyNotFound{key, err}
		return ExitError{Code: ExitNoKey, Msg: nf.Error(), Err: nf}
	}
	return err
}

// FencedError words a write refused under --fence spec (kv.ErrFenced,
// on either backend) with ExitFenced; any other error is returned as it
// is.
func FencedError(err error, spec string) error {
	if !errors.Is(err, kv.ErrFenced) {
		return err
	}
	return ExitError{Code: ExitFenced, Err: err,
		Msg: fmt.Sprintf("fenced: %s is not the current holder's token, nothing written (%v)", spec, Trim(err))}
}
