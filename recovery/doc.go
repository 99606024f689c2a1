// Package recovery opens a kv data directory: it loads the snapshot,
// replays the WAL segments the snapshot does not cover, cuts a torn tail,
// and checkpoints, or with Options.DeferCheckpoint leaves the checkpoint to
// its caller. FORMAT.md at the repository root lists the steps.
//
// # Guarantees
//
// Recover reads and checks everything before it writes anything: when it
// finds damage that a crash cannot cause (IsCorrupt), it returns the error
// and leaves every file as it was; `kv DIR repair` is the explicit way out.
// Segments a snapshot covers are never replayed; a segment is deleted only
// after a durable snapshot covers it, and a snapshot that this process did
// not write is made durable before anything it covers is deleted.
//
// A directory that is not a store (Identify: no marker, no segment or
// snapshot the store wrote) is refused with ErrNotDataDir before anything
// in it is read as data; an empty one gets a new store unless NoCreate.
// Salvage reads what survives damage without changing anything, and
// PlanRepair lists, record by record, what a repair would drop.
//
// # Crash contract
//
// Recover is idempotent: a crash at any point of it (process crash or power
// loss), followed by another Recover, gives the same map as one Recover
// without a crash. The tests crash it after every file operation, twice
// over.
//
// # Bug variants
//
// The crash checkers' deliberate defects (internal/variant) reach this
// package through its file system: a variant-carrying file system (only
// the module's own tests and kv crashsim/killtest --bug can make one)
// turns on the branches that ask variant.Of, such as double-apply, which
// writes 0 as the covered segment: the one-line bug of the article
// "Recovery Code Must Survive a Crash Too" (Mehdi Akiki), whose recovery
// this package's follows and which its comments and tests call the
// article. A build with -tags kvrelease compiles them away.
//
// # Usage
//
//	res, err := recovery.Recover(vfs.OS, dir, recovery.Options{})
//	if recovery.IsCorrupt(err) { ... }
//	defer res.Writer.Close()
//	// res.Map is the state; res.Writer appends the next records.
package recovery
