package vfs

import "golang.org/x/sys/unix"

// madvPopulateRead is MADV_POPULATE_READ (see AdvicePopulate).
const madvPopulateRead = unix.MADV_POPULATE_READ
