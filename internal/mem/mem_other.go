//go:build !linux

package mem

// populateWrite is the portable twin of the Linux madvise: it does
// nothing and reports the advice unsupported, so that Populate stops
// asking. The pages fault in as they are first written, as they would
// without Populate.
func populateWrite(b []byte) bool { return false }
