// Package forge writes, for tests, the bytes a build of another format
// version would write: files this build must refuse as a version it does
// not read, not as damage. It works from FORMAT.md's layouts, not from
// the code that reads them.
package forge

import (
	"encoding/binary"
	"hash/crc32"
)

// SegmentVersion makes the segment header at the start of b name format
// version v, with checksums that hold (FORMAT.md, "Segment header": the
// version is bytes 4-5 of the header record's payload, which starts at
// byte 24; both checksums start from the CRC-32C of the salt, payload
// bytes 16-23). b must hold the whole header record, 48 bytes.
func SegmentVersion(b []byte, v uint16) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	binary.LittleEndian.PutUint16(b[24+4:], v)
	crc0 := crc32.Update(0, tab, b[24+16:48])
	binary.LittleEndian.PutUint32(b[16:], crc32.Update(crc0, tab, b[:16]))
	binary.LittleEndian.PutUint32(b[20:], crc32.Update(crc32.Update(crc0, tab, b[:20]), tab, b[24:48]))
}
