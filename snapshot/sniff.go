package snapshot

import (
	"io"

	"github.com/kvstore/kv/vfs"
)

// Sniff reports whether the file name starts with the snapshot's magic
// (of any version): whether a snapshot writer wrote it. It reads six
// bytes and checks nothing else; a damaged snapshot is still one.
func Sniff(fsys vfs.FS, name string) (bool, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var b [len(magic)]byte
	if n, err := f.ReadAt(b[:], 0); n < len(b) {
		if err == io.EOF {
			err = nil
		}
		return false, err
	}
	return b == magic, nil
}

// SniffPrefix reports whether the file name holds the start of a snapshot
// as far as it goes, an empty file included: what a crash leaves of a
// snapshot being written (snapshot.tmp). It reads six bytes.
func SniffPrefix(fsys vfs.FS, name string) (bool, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var b [len(magic)]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && err != io.EOF {
		return false, err
	}
	return string(b[:n]) == string(magic[:n]), nil
}
