// Package kvcli is what the kv command prints and how it exits, for the
// verbs that run on a data directory and on an etcd cluster alike (get,
// put, del, add, scan, dump, watch, lock, locks): the JSON rule of
// "kv help json", the text lines, the error messages of a missing key
// and a fenced write, and the exit codes. cmd/kv uses it on the
// embedded store; kv-etcd (module github.com/kvstore/kv/etcd,
// etcd/cmd/kv-etcd) on a cluster, through kvapi.KV. So the two print
// the same bytes and exit with the same codes because they run the same
// code, not a copy of it; etcd/cmd/kv-etcd's TestSameOutput runs one
// table of invocations on both and compares them.
//
// It lives under internal/: it is the command's, not an API. The etcd
// module may import it because its import path is under this module's.
package kvcli
