package etcdkv

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// code is the gRPC code of an error from the etcd client.
func code(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return status.Code(err)
}

// mapErr turns an error of the etcd client into the store's: a request
// etcd refused as too large or with too many operations is
// kv.ErrTooLarge, and for a write, any error that does not prove the
// request was refused before it could commit matches
// kvapi.ErrUnknownOutcome (a timeout, a lost connection, a leader change
// while it was proposed). The client's error stays wrapped: errors.Is
// still finds context.DeadlineExceeded, and rpctypes' errors.
func mapErr(err error, write bool) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge),
		errors.Is(err, rpctypes.ErrGRPCTooManyOps), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge):
		return fmt.Errorf("%w: etcd: %w", kv.ErrTooLarge, err)
	case errors.Is(err, rpctypes.ErrDuplicateKey), errors.Is(err, rpctypes.ErrGRPCDuplicateKey):
		return fmt.Errorf("%w: etcd: %w", kvapi.ErrUnsupported, err)
	case errors.Is(err, rpctypes.ErrEmptyKey), errors.Is(err, rpctypes.ErrGRPCEmptyKey):
		return fmt.Errorf("%w: etcd: %w", kv.ErrInvalid, err)
	}
	if write && !refused(err) {
		return fmt.Errorf("%w: etcd: %w", kvapi.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("etcdkv: %w", err)
}

// refused reports whether err proves that etcd refused a write before
// proposing it: the request was malformed, over a limit, not permitted,
// or the cluster is out of space or has too many requests pending. Every other error (Unavailable,
// DeadlineExceeded, Canceled, Unknown, "request timed out", "leader
// changed") leaves the outcome open: a proposal may commit after its
// client gave up on it.
func refused(err error) bool {
	switch code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange,
		codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted:
		return true
	}
	return false
}
