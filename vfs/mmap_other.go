//go:build !linux

package vfs

// madvPopulateRead is MADV_POPULATE_READ, which only Linux has (see
// AdvicePopulate).
const madvPopulateRead = -1
