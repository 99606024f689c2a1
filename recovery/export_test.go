package recovery

// MarkerContent returns the marker's bytes, for tests that write one.
func MarkerContent() string { return markerContent }

// MarkerBytes returns the marker of a layout version, for tests that
// write one of another version.
func MarkerBytes(v int) string { return markerBytes(v) }
