package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/kv"
)

// Grant grants an etcd lease of ttl rounded up to whole seconds, etcd's
// unit (a cluster also raises a TTL below its minimum, one and a half
// election timeouts, to it): the LeaseInfo's TTL is the one granted. Its
// Deadline is the time Grant sent the request plus that TTL: the leader
// starts the lease after it, and a new leader only renews it, so the
// lease does not end before.
func (k *KV) Grant(ctx context.Context, ttl time.Duration) (kv.LeaseInfo, error) {
	if err := k.check(ctx); err != nil {
		return kv.LeaseInfo{}, err
	}
	if ttl <= 0 || ttl > kv.MaxLeaseTTL {
		return kv.LeaseInfo{}, fmt.Errorf("%w: lease TTL %v, want above 0 and at most %v", kv.ErrInvalid, ttl, kv.MaxLeaseTTL)
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	sent := time.Now()
	resp, err := k.c.Grant(ctx, secs)
	if err != nil {
		return kv.LeaseInfo{}, mapErr(err, true)
	}
	granted := time.Duration(resp.TTL) * time.Second
	return kv.LeaseInfo{ID: kv.LeaseID(resp.ID), TTL: granted, Deadline: sent.Add(granted)}, nil
}

// KeepAlive renews lease id once (clientv3's KeepAliveOnce). The
// Deadline it returns is the time it sent the renewal plus the TTL.
func (k *KV) KeepAlive(ctx context.Context, id kv.LeaseID) (kv.LeaseInfo, error) {
	if err := k.check(ctx); err != nil {
		return kv.LeaseInfo{}, err
	}
	if id > math.MaxInt64 {
		return kv.LeaseInfo{}, &kv.LeaseError{ID: id}
	}
	sent := time.Now()
	resp, err := k.c.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	if err != nil {
		return kv.LeaseInfo{}, leaseErr(err, id)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	return kv.LeaseInfo{ID: id, TTL: ttl, Deadline: sent.Add(ttl)}, nil
}

// Revoke revokes lease id. Its revision is the one that deleted the
// lease's keys, or, when it had none, the cluster's current one: etcd
// commits no revision for it.
func (k *KV) Revoke(ctx context.Context, id kv.LeaseID) (kv.Revision, error) {
	if err := k.check(ctx); err != nil {
		return 0, err
	}
	if id > math.MaxInt64 {
		return 0, &kv.LeaseError{ID: id}
	}
	resp, err := k.c.Revoke(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, leaseErr(err, id)
	}
	return kv.Revision(resp.Header.Revision), nil
}

// leaseErr maps the error of an operation on lease id, or of a
// transaction putting on it: etcd's "lease not found" (revoked, expired,
// never granted) is a *kv.LeaseError, matching kv.ErrLeaseNotFound, and
// nothing was written; etcd does not tell an expired lease from a
// revoked one, so it never matches kv.ErrLeaseExpired. Any other error is
// mapErr's for a write.
func leaseErr(err error, id kv.LeaseID) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
		return fmt.Errorf("%w: etcd: %w", &kv.LeaseError{ID: id}, err)
	}
	return mapErr(err, true)
}

// txnLease returns the lease of t's first put on a lease, for the error
// of a transaction etcd refused for a lease not found.
func txnLease(t *kv.Txn) kv.LeaseID {
	for _, ops := range [][]kv.Op{t.Then, t.Else} {
		for _, op := range ops {
			if op.Lease != 0 {
				return op.Lease
			}
		}
	}
	return 0
}
