package kvcli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvstore/kv/kv"
)

// TestErrorsKeepTheirMeaning: the errors both backends return for a
// missing key, a fenced write, a compacted revision and a lease that
// ended keep matching the store's Go errors through kvcli's wording,
// and get their exit codes.
func TestErrorsKeepTheirMeaning(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		is   error
		code int
		msg  string
	}{
		{"not found", KeyError([]byte("k"), fmt.Errorf("%w: %q", kv.ErrNotFound, "k")), kv.ErrNotFound, ExitNoKey, `key "k" not found`},
		{"fenced", FencedError(fmt.Errorf("etcdkv: %w", kv.ErrFenced), "job:7"), kv.ErrFenced, ExitFenced,
			"fenced: job:7 is not the current holder's token, nothing written (etcdkv: fencing token is stale)"},
		{"lease ended", KeyError([]byte("k"), &kv.LeaseError{ID: 9}), kv.ErrLeaseNotFound, ExitFailed, ""},
		{"compacted", FencedError(&kv.CompactedError{Requested: 1, Oldest: 5}, ""), kv.ErrCompacted, ExitFailed, ""},
		{"usage", Usagef("--limit: %d is below 0", -1), nil, ExitUsage, "--limit: -1 is below 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("%v does not match %v", tc.err, tc.is)
			}
			if got := Code(tc.err); got != tc.code {
				t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.code)
			}
			if msg := tc.err.Error(); tc.msg != "" && msg != tc.msg {
				t.Errorf("message %q, want %q", msg, tc.msg)
			}
		})
	}
}
