package etcdkv

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// TestMapErr: a write's error matches kvapi.ErrUnknownOutcome unless it
// proves etcd refused the write before proposing it; a read's never
// does; limits, duplicate keys and empty keys map to the store's errors;
// the client's error stays wrapped.
func TestMapErr(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		write   bool
		unknown bool
		is      error // also matched, if not nil
	}{
		{"deadline, write", context.DeadlineExceeded, true, true, context.DeadlineExceeded},
		{"canceled, write", context.Canceled, true, true, context.Canceled},
		{"unavailable, write", status.Error(codes.Unavailable, "no leader"), true, true, nil},
		{"request timed out, write", rpctypes.ErrGRPCTimeout, true, true, nil},
		{"leader changed, write", rpctypes.ErrGRPCLeaderChanged, true, true, nil},
		{"deadline, read", context.DeadlineExceeded, false, false, context.DeadlineExceeded},
		{"too many ops", rpctypes.ErrGRPCTooManyOps, true, false, kv.ErrTooLarge},
		{"request too large", rpctypes.ErrGRPCRequestTooLarge, true, false, kv.ErrTooLarge},
		{"duplicate key", rpctypes.ErrGRPCDuplicateKey, true, false, kvapi.ErrUnsupported},
		{"empty key", rpctypes.ErrGRPCEmptyKey, true, false, kv.ErrInvalid},
		{"no space", rpctypes.ErrGRPCNoSpace, true, false, nil},
		{"permission denied", rpctypes.ErrGRPCPermissionDenied, true, false, nil},
		{"too many requests", rpctypes.ErrGRPCRequestTooManyRequests, true, false, nil},
	} {
		err := mapErr(tc.err, tc.write)
		if got := errors.Is(err, kvapi.ErrUnknownOutcome); got != tc.unknown {
			t.Errorf("%s: %v matches ErrUnknownOutcome: %v, want %v", tc.name, err, got, tc.unknown)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v does not match %v", tc.name, err, tc.is)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap the client's error", tc.name, err)
		}
	}
	if mapErr(nil, true) != nil {
		t.Error("mapErr(nil) is not nil")
	}
}
