package wal

// SetWindow makes r read segments n bytes at a time, so that tests can
// cross window boundaries with small segments.
func SetWindow(r *Reader, n int) { r.window = n }

// WithSalt returns o with every segment created salted with salt, so that
// a test can compare bytes with a golden file.
func WithSalt(o Options, salt uint64) Options {
	o.salt = func() uint64 { return salt }
	return o
}
