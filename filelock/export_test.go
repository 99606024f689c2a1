package filelock

import "github.com/kvstore/kv/filelock/lockstore"

// DirBackend is the backend of Open: the store in dir, opened for each
// operation.
func DirBackend(dir string) lockstore.Backend {
	return &dirBackend{dir: dir, opts: DefaultStoreOptions, busy: -1}
}
