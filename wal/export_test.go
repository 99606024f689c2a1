package wal

// SetWindow makes r read segments n bytes at a time, so that tests can
// cross window boundaries with small segments.
func SetWindow(r *Reader, n int) { r.window = n }
