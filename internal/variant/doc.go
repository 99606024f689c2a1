// Package variant holds the store's bug variants: deliberate defects,
// each switched on by a checker's test (and by kv crashsim --bug NAME and
// kv killtest --bug NAME) to show that the checker catches the bug it is
// for. It is internal: no user of the store can switch one on.
//
// A variant reaches the store through its file system: Wrap returns the
// file system a store is opened on with the variant in it. The variants
// that only leave out or misplace a sync (no-sync, no-dirsync,
// rename-before-fsync, retry-fsync) live entirely in that wrapper, the way
// pebble keeps its fault injection in a file system wrapper outside the
// code under test: the store's code does not know about them, and a
// recording file system below the wrapper records what the disk sees.
// The variants that change the store's own order of steps (double-apply,
// ack-before-sync, unlink-early, trust-tmp, torn-as-corrupt) are branches
// in the store's code that ask Of which variant the file system carries;
// Of is constant None in a build with the kvrelease tag, so that those
// branches compile away.
package variant
