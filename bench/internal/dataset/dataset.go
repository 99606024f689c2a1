// Package dataset is the data set the bench module's commands load and
// check (kvbench, imagebench, openbench): keys of 16 bytes that look
// random, each the bijection of its index, and 100-byte values that hold
// their key and a generation, so that no key list is kept in memory and
// every value read back can be checked.
package dataset

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Sizes of a key and of a value.
const (
	KeySize   = 16
	ValueSize = 100
)

// splitmix64 is a bijection on uint64 that scatters consecutive inputs.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Key writes the i-th key of the data set into k (of KeySize bytes or
// more) and returns it: distinct for distinct i (the first 8 bytes are a
// bijection of i).
func Key(k []byte, i int) []byte {
	k = k[:KeySize]
	binary.BigEndian.PutUint64(k[0:], splitmix64(uint64(i)))
	binary.BigEndian.PutUint64(k[8:], splitmix64(uint64(i)^0x5bd1e995))
	return k
}

// Value writes the value of key at generation gen into v (of ValueSize
// bytes or more) and returns it: the key, the generation, and a filler
// that depends on both.
func Value(v, key []byte, gen uint64) []byte {
	v = v[:ValueSize]
	copy(v, key)
	binary.LittleEndian.PutUint64(v[KeySize:], gen)
	for i := KeySize + 8; i < ValueSize; i++ {
		v[i] = byte('a' + (uint64(i)+gen)%26)
	}
	return v
}

// Check returns the generation of v if v is a value Value wrote for key.
func Check(key, v []byte) (uint64, error) {
	if len(v) != ValueSize || !bytes.Equal(v[:KeySize], key) {
		return 0, fmt.Errorf("key %x: read back a value of %d bytes that is not this key's (%.24x)", key, len(v), v)
	}
	gen := binary.LittleEndian.Uint64(v[KeySize:])
	for i := KeySize + 8; i < ValueSize; i++ {
		if v[i] != byte('a'+(uint64(i)+gen)%26) {
			return 0, fmt.Errorf("key %x: value damaged at byte %d", key, i)
		}
	}
	return gen, nil
}

// CheckAt fails unless v is the value of key at generation gen.
func CheckAt(key, v []byte, gen uint64) error {
	g, err := Check(key, v)
	if err == nil && g != gen {
		err = fmt.Errorf("key %x: a value of generation %d, want %d", key, g, gen)
	}
	return err
}

// Pick returns the index of the n-th key a reader asks for, of a data
// set of keys keys: every index, in an order that looks random, the same
// in every run.
func Pick(n, keys int) int { return int(splitmix64(uint64(n)^0xfeed) % uint64(keys)) }

// Load hands the first keys pairs of the data set, at generation 0, to
// put in batches of batch pairs, fresh slices each.
func Load(keys, batch int, put func(ks, vs [][]byte) error) error {
	var ks, vs [][]byte
	for lo := 0; lo < keys; lo += batch {
		ks, vs = ks[:0], vs[:0]
		for i := lo; i < min(lo+batch, keys); i++ {
			k := Key(make([]byte, KeySize), i)
			ks = append(ks, k)
			vs = append(vs, Value(make([]byte, ValueSize), k, 0))
		}
		if err := put(ks, vs); err != nil {
			return err
		}
	}
	return nil
}
