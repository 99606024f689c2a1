package snapshot_test

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestDecodeReader: DecodeReader gives what DecodeLeases gives, for the
// golden snapshots (leases included) and each damaged file in testdata/, naming the file it is
// told; on a valid snapshot it reads every byte of it, and never a byte
// past its size, so that a copy taken as it reads is the snapshot.
func TestDecodeReader(t *testing.T) {
	for _, tf := range testdataFiles {
		t.Run(tf.name, func(t *testing.T) {
			b := tf.make(t)
			// Bytes after the snapshot in the stream are not its own: one
			// reader holds both, so that a read can run past the end.
			cr := &countingReader{r: bytes.NewReader(append(slices.Clone(b), make([]byte, 4096)...))}
			var copied bytes.Buffer
			var d decoded
			err := snapshot.DecodeReader(io.TeeReader(cr, &copied), "some/file", int64(len(b)),
				func(m snapshot.Meta) error { d.Meta = m; return nil },
				func(le *record.Lease) error { d.Leases = append(d.Leases, *le); return nil },
				func(e *record.Entry) error {
					c := *e
					c.Key, c.Value = bytes.Clone(e.Key), bytes.Clone(e.Value)
					d.Entries = append(d.Entries, &c)
					return nil
				})
			if cr.n > int64(len(b)) {
				t.Errorf("read %d bytes of a snapshot of %d", cr.n, len(b))
			}
			if tf.want == nil {
				checkCorrupt(t, err, tf.wantErr, "some/file", tf.wantOff)
				return
			}
			if err != nil {
				t.Fatalf("DecodeReader: %v", err)
			}
			if diff := cmp.Diff(*tf.want, d, equateEmpty); diff != "" {
				t.Errorf("DecodeReader (-want +got):\n%s", diff)
			}
			if !bytes.Equal(copied.Bytes(), b) {
				t.Errorf("the copy taken while reading holds %d bytes, not the %d of the snapshot", copied.Len(), len(b))
			}
		})
	}
}
