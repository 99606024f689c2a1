package recovery

import "github.com/kvstore/kv/vfs"

// MarkerContent returns the marker's bytes, for tests that write one.
func MarkerContent() string { return markerContent }

// MarkerBytes returns the marker of a layout version, for tests that
// write one of another version.
func MarkerBytes(v int) string { return markerBytes(v) }

// IdentifyByListing is Identify the long way, from the listing, without
// its shortcut through the marker.
func IdentifyByListing(fsys vfs.FS, dir string) (DirKind, error) {
	kind, _, err := identify(fsys, dir)
	return kind, err
}
