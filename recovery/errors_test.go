package recovery_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvstore/kv/internal/corrupt"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/wal"
)

// TestIsCorrupt checks the one classifier on every file type's sentinel,
// bare, wrapped and located, and on a file type it was never told about:
// a new sentinel made with corrupt.New needs no edit here. A format
// version this build does not read is not corruption.
func TestIsCorrupt(t *testing.T) {
	errNew := corrupt.New("newtype: corrupt file")
	at := func(sentinel error) error {
		return &wal.CorruptError{Err: sentinel, File: "/data/f", Offset: 8, Reason: "r"}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"wal", wal.ErrCorrupt, true},
		{"wal, located", at(wal.ErrCorrupt), true},
		{"snapshot, located", at(snapshot.ErrCorrupt), true},
		{"record, wrapped", fmt.Errorf("%w: at byte 3: unknown kind", record.ErrCorrupt), true},
		{"record, located", fmt.Errorf("open: %w", at(record.ErrCorrupt)), true},
		{"a new file type", at(errNew), true},
		{"wal version", at(wal.ErrVersion), false},
		{"snapshot version", at(snapshot.ErrVersion), false},
		{"not integer", record.ErrNotInteger, false},
		{"other", errors.New("io"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := recovery.IsCorrupt(tc.err); got != tc.want {
				t.Errorf("IsCorrupt(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	// Each sentinel is still its own: a snapshot's damage is not a log's.
	if errors.Is(at(snapshot.ErrCorrupt), wal.ErrCorrupt) || errors.Is(at(wal.ErrCorrupt), record.ErrCorrupt) {
		t.Error("one package's sentinel matches another's")
	}
	// wal.CorruptError is corrupt.Error: errors.As finds either.
	var ce *corrupt.Error
	if !errors.As(fmt.Errorf("x: %w", at(snapshot.ErrCorrupt)), &ce) || ce.Offset != 8 {
		t.Error("errors.As does not find the located error")
	}
}
