package wal

import "testing"

// TestKeyForCache derives keys of salts in turn, each again right after
// itself (what the cache serves) and after another salt (what it must
// not), and checks each against a key made afresh.
func TestKeyForCache(t *testing.T) {
	for _, salt := range []uint64{1, 1, 2, 1, 0x9e3779b97f4a7c15, 2, 2} {
		got, want := keyFor(salt), makeKey(salt)
		if got.salt != salt || got.crc0 != want.crc0 || got.key != want.key {
			t.Fatalf("keyFor(%#x) is not the key of that salt", salt)
		}
	}
}
