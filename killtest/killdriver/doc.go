// Package killdriver is the kill driver, one of the store's crash
// checkers (the other is the crash-state simulator, killtest/crashsim): it runs the
// real kv binary as separate processes on the real kernel, kills them with
// SIGKILL at random moments, and checks what the next recovery finds, as
// the article "Recovery Code Must Survive a Crash Too" (Mehdi Akiki),
// called the article in this package, does.
//
// # What it checks
//
// Recovery (recovery.go) prepares a data directory holding the article's
// 17 operations (or more, in more segments) in its log and no snapshot,
// kills recoveries of copies of it (kv DIR dump) after a random delay, and
// checks that a second recovery gives the map of a recovery without a
// crash. Writes (writes.go) kills writers (kv DIR load --ack, fed op lines
// through a pipe) after a random delay or right after a random
// acknowledgement, and optionally the recoveries after them, and checks
// that the recovered map is the map after some prefix of the operations
// (opmodel.History) that holds every acknowledged one: none lost, none
// applied twice, in order. Both report in the article's table form
// (Result.WriteReport).
//
// A process crash cannot lose what the page cache holds, so the driver
// cannot see a missing fsync (the simulator can): what it checks is the
// real binary under real timing. The window of the random delays is sized
// from the machine (window.go), by watching when a process first changes
// its directory (watch_linux.go), so that most kills land while the
// process works rather than during its start-up.
//
// # Crash contract
//
// None of its own: it kills kv processes in a work directory of its own,
// which it removes unless a run failed or Keep is set, and never touches a
// directory it did not create. Unlike the library, it uses os and os/exec
// directly, not vfs: it copies and fingerprints the store's files but
// never interprets them. It is shown to catch the double-apply bug variant
// (TestRecoveryDoubleApply).
//
// # Usage
//
//	res, err := killdriver.Recovery(ctx, killdriver.RecoveryOptions{Binary: "/usr/local/bin/kv", Runs: 100})
//	if err != nil { ... } // the driver could not do its job
//	res.WriteReport(os.Stdout)
//	if !res.OK(false) { ... } // a run had a bad outcome
//
// kv killtest is its command line.
package killdriver
