// Package pagecache empties the page cache before a benchmark's cold open,
// and fills it before a warm one, for the bench module's commands
// (kvbench, openbench): drop_caches when the process may write it,
// posix_fadvise(DONTNEED) on the store's files otherwise.
package pagecache
