package corrupt_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvstore/kv/internal/corrupt"
)

func TestClassifier(t *testing.T) {
	errA := corrupt.New("a: corrupt a")
	errB := corrupt.New("b: corrupt b")
	errVersion := errors.New("a: unsupported format version")
	tests := []struct {
		name    string
		err     error
		corrupt bool
		is      error // a sentinel err must match, if any
		isNot   error // a sentinel err must not match, if any
		msg     string
	}{
		{name: "sentinel", err: errA, corrupt: true, is: errA, isNot: errB, msg: "a: corrupt a"},
		{name: "wrapped with %w", err: fmt.Errorf("%w: at byte 3", errB), corrupt: true, is: errB, isNot: errA, msg: "b: corrupt b: at byte 3"},
		{name: "located", err: &corrupt.Error{Err: errA, File: "dir/f", Offset: 12, Reason: "checksum mismatch"},
			corrupt: true, is: errA, isNot: errB, msg: "a: corrupt a: dir/f at offset 12: checksum mismatch"},
		{name: "whole file", err: &corrupt.Error{Err: errB, File: "dir/f", Offset: -1, Reason: "missing"},
			corrupt: true, is: errB, msg: "b: corrupt b: dir/f: missing"},
		{name: "located, wrapped again", err: fmt.Errorf("open: %w", &corrupt.Error{Err: errA, File: "f", Offset: 0, Reason: "r"}),
			corrupt: true, is: errA, msg: "open: a: corrupt a: f at offset 0: r"},
		{name: "version is not corruption", err: &corrupt.Error{Err: errVersion, File: "f", Offset: 6, Reason: "version 9"},
			corrupt: false, is: errVersion, isNot: errA, msg: "a: unsupported format version: f at offset 6: version 9"},
		{name: "other error", err: errors.New("io"), corrupt: false, msg: "io"},
		{name: "nil", err: nil, corrupt: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := corrupt.Is(tc.err); got != tc.corrupt {
				t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.corrupt)
			}
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("%v does not match %v", tc.err, tc.is)
			}
			if tc.isNot != nil && errors.Is(tc.err, tc.isNot) {
				t.Errorf("%v matches %v", tc.err, tc.isNot)
			}
			if tc.err != nil && tc.err.Error() != tc.msg {
				t.Errorf("message %q, want %q", tc.err.Error(), tc.msg)
			}
		})
	}
}
