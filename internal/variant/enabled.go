//go:build !kvrelease

package variant

// Enabled reports whether this build carries the bug variants: every
// build but one with the kvrelease tag.
const Enabled = true
