package dataset

import "testing"

// TestCheck: Check accepts what Value wrote, at its generation, and
// refuses another key's value and a damaged one.
func TestCheck(t *testing.T) {
	var k, k2 [KeySize]byte
	var v [ValueSize]byte
	Key(k[:], 7)
	Key(k2[:], 8)
	if gen, err := Check(k[:], Value(v[:], k[:], 3)); err != nil || gen != 3 {
		t.Fatalf("Check of its own value: %d, %v", gen, err)
	}
	if _, err := Check(k2[:], v[:]); err == nil {
		t.Error("Check took another key's value")
	}
	v[50] ^= 1
	if _, err := Check(k[:], v[:]); err == nil {
		t.Error("Check took a damaged value")
	}
	if string(k[:]) == string(k2[:]) {
		t.Error("two indices gave one key")
	}
}
