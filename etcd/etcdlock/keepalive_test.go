package etcdlock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// flakyKV answers KeepAlive from a script: each call takes the next
// error (nil: renewed, TTL ttl), and after the script, ErrLeaseNotFound.
type flakyKV struct {
	kvapi.KV
	mu     sync.Mutex
	ttl    time.Duration
	script []error
	calls  int
}

func (f *flakyKV) KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.script) == 0 {
		return kv.LeaseInfo{}, &kv.LeaseError{ID: id}
	}
	err := f.script[0]
	f.script = f.script[1:]
	if err != nil {
		return kv.LeaseInfo{}, err
	}
	// A deadline far off, so that the failures after it stay within it.
	return kv.LeaseInfo{ID: id, TTL: f.ttl, Deadline: time.Now().Add(time.Hour)}, nil
}

// TestKeepAliveRidesOutFailures: renewals whose outcome is unknown are
// tried again while the lease's deadline has not passed, and the loop
// goes on past them; it ends at the lease's end (not found). A loop that
// stopped at the first failure (kvapi.KeepAliveLoop's rule) makes 2
// calls here, not 6.
func TestKeepAliveRidesOutFailures(t *testing.T) {
	unknown := fmt.Errorf("%w: etcd: no leader", kvapi.ErrUnknownOutcome)
	// A TTL of 300 ms renews every 100 ms.
	f := &flakyKV{ttl: 300 * time.Millisecond, script: []error{nil, unknown, unknown, nil, unknown}}
	info := kv.LeaseInfo{ID: 7, TTL: 300 * time.Millisecond, Deadline: time.Now().Add(time.Hour)}
	keepAliveWith(t, f, info)
	if f.calls != 6 {
		t.Errorf("KeepAlive called %d times, want 6 (5 scripted, then not found)", f.calls)
	}
}

// TestKeepAliveGivesUpAtTheDeadline: with no renewal through, the loop
// ends once the deadline of the last one has passed.
func TestKeepAliveGivesUpAtTheDeadline(t *testing.T) {
	unknown := fmt.Errorf("%w: etcd: timeout", kvapi.ErrUnknownOutcome)
	script := make([]error, 1000)
	for i := range script {
		script[i] = unknown
	}
	f := &flakyKV{ttl: 300 * time.Millisecond, script: script}
	info := kv.LeaseInfo{ID: 7, TTL: 300 * time.Millisecond, Deadline: time.Now().Add(500 * time.Millisecond)}
	keepAliveWith(t, f, info)
	if len(f.script) == 0 {
		t.Errorf("the loop ran through its script: it did not stop at the deadline")
	}
	if time.Now().Before(info.Deadline) {
		t.Errorf("the loop ended before the deadline, with renewals still possible")
	}
}

// keepAliveWith runs keepAlive on f until it returns, a minute at most.
func keepAliveWith(t *testing.T, f *flakyKV, info kv.LeaseInfo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keepAlive(ctx, f, info)
	if ctx.Err() != nil {
		t.Fatalf("keepAlive still running after a minute")
	}
}
