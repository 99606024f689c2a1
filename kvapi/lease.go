package kvapi

import (
	"context"
	"time"

	"github.com/kvstore/kv/kv"
)

// PutLease sets key to value bound to lease id (kv.Op.WithLease): the
// key is deleted when the lease ends. It fails with an error matching
// kv.ErrLeaseNotFound, writing nothing, when the lease has ended.
func PutLease(ctx context.Context, db KV, key, value []byte, id kv.LeaseID) (kv.Revision, error) {
	res, err := db.Txn(ctx, kv.Txn{Then: []kv.Op{kv.PutOp(key, value).WithLease(id)}})
	return res.Revision, err
}

// KeepAliveLoop renews lease id every third of its TTL until ctx ends
// (it returns ctx's error) or a renewal fails (it returns that error:
// one matching kv.ErrLeaseNotFound once the lease has ended,
// ErrUnknownOutcome when a renewal's fate is unknown). Run it on a
// goroutine of its own. A holder whose loop returned must assume its
// keys gone at the Deadline of the last renewal that returned.
func KeepAliveLoop(ctx context.Context, db KV, id kv.LeaseID) error {
	for {
		info, err := db.KeepAlive(ctx, id)
		if err != nil {
			return err
		}
		t := time.NewTimer(max(info.TTL/3, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
