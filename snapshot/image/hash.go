package image

import "github.com/cespare/xxhash/v2"

// xxh64 is xxHash64 of b with seed, as its reference implementation
// (github.com/Cyan4973/xxHash) defines it, computed by
// github.com/cespare/xxhash/v2. Unlike maphash, whose seed is drawn per
// process, it gives the same hash in every process, which an index stored
// in a file needs; the seed, drawn per image and kept in its footer, keeps
// a set of keys crafted to collide in one image from colliding in the
// next. Part of the on-disk format (FORMAT.md, "Snapshot image").
func xxh64(b []byte, seed uint64) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	d.Write(b)
	return d.Sum64()
}
