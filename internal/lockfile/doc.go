// Package lockfile holds what a data directory's LOCK tells of the
// process that holds it (FORMAT.md, "The data directory"): the line an
// open writes there where the operating system cannot name a lock's
// holder, and the reading of the holder back, shared by the store and
// by the kv command's repair, which takes the lock itself.
package lockfile
