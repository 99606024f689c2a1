package lockstore

import (
	"context"
	"errors"
)

// ErrFenced is returned by a Txn whose Fence does not hold: the fence key
// is gone or was created at another revision than the token. Nothing was
// written. The kv adapter's error also matches kv.ErrFenced.
var ErrFenced = errors.New("lockstore: fencing token is stale")

// ErrLeaseEnded is returned by a Txn that puts a key under a lease
// (Op.Lease) that has ended: expired or revoked. Nothing was written.
var ErrLeaseEnded = errors.New("lockstore: lease ended")

// KeyValue is a key's state.
type KeyValue struct {
	Key       string
	Value     []byte
	CreateRev int64 // the revision of the transaction that created the key
	ModRev    int64 // the revision of the transaction that last changed it
}

// Target is what a Compare looks at.
type Target uint8

// Compare targets. Type 0 is reserved as invalid.
const (
	// TargetCreateRev compares the key's CreateRev (0 when absent).
	TargetCreateRev Target = iota + 1
	// TargetModRev compares the key's ModRev (0 when absent).
	TargetModRev
	// TargetExists compares the key's existence: Rev 1 present, 0 absent.
	TargetExists
)

// Compare is an equality guard of a Txn: the key's Target equals Rev.
type Compare struct {
	Key    string
	Target Target
	Rev    int64
}

// CreateRevIs holds when key's CreateRev is rev (0: the key is absent).
func CreateRevIs(key string, rev int64) Compare {
	return Compare{Key: key, Target: TargetCreateRev, Rev: rev}
}

// ModRevIs holds when key's ModRev is rev (0: the key is absent).
func ModRevIs(key string, rev int64) Compare {
	return Compare{Key: key, Target: TargetModRev, Rev: rev}
}

// Absent holds when key does not exist.
func Absent(key string) Compare { return Compare{Key: key, Target: TargetExists, Rev: 0} }

// Exists holds when key exists.
func Exists(key string) Compare { return Compare{Key: key, Target: TargetExists, Rev: 1} }

// Op is a write of a Txn: a put of Value, or a delete.
type Op struct {
	Key    string
	Value  []byte
	Delete bool
	// Lease, for a put, binds the key to a lease of a Leaser backend
	// (Lease.ID): the store deletes the key when the lease ends. 0 binds
	// it to none; a backend that is not a Leaser refuses any other.
	Lease int64
}

// Put sets key to value.
func Put(key string, value []byte) Op { return Op{Key: key, Value: value} }

// PutLeased sets key to value, bound to lease (see Op.Lease).
func PutLeased(key string, value []byte, lease int64) Op {
	return Op{Key: key, Value: value, Lease: lease}
}

// Delete removes key; a missing key is not an error.
func Delete(key string) Op { return Op{Key: key, Delete: true} }

// Fence guards a Txn with a fencing token: it commits only if Key exists
// and its CreateRev is Token, checked in the same atomic step.
type Fence struct {
	Key   string
	Token int64
}

// Txn applies Then if every compare of If holds; otherwise it writes
// nothing and reports Succeeded false. A Fence, if set, is checked first
// and fails the Txn with ErrFenced.
type Txn struct {
	If    []Compare
	Then  []Op
	Fence *Fence
}

// TxnResult is the outcome of a Txn.
type TxnResult struct {
	Succeeded bool
	// Revision is the revision the Txn committed at; when it wrote
	// nothing, the store's revision at the time.
	Revision int64
}

// Backend is the store as the lock library sees it. Every method is safe
// for concurrent use; ctx bounds any wait (for the store's writer lock,
// for the network).
type Backend interface {
	// Get returns key's state, and false when it is absent.
	Get(ctx context.Context, key string) (KeyValue, bool, error)
	// Range returns the keys that start with prefix, in key order, and
	// the store's revision at the time of the read.
	Range(ctx context.Context, prefix string) ([]KeyValue, int64, error)
	// Txn commits t atomically.
	Txn(ctx context.Context, t Txn) (TxnResult, error)
	// Wait returns when a key under prefix may have changed after
	// revision rev (a spurious return is allowed; a missed change is
	// not), or with ctx's error when ctx ends first.
	Wait(ctx context.Context, prefix string, rev int64) error
}

// Sessioner is implemented by a Backend whose every operation pays to
// reach the store, such as a kv directory opened and closed for each
// operation. Session returns a Backend over one connection (one open
// store) for a short run of operations, and the function that ends it;
// the lock library wraps each attempt to acquire in one session.
type Sessioner interface {
	Session(ctx context.Context) (Backend, func() error, error)
}

// Leaser is implemented by a Backend whose keys can be bound to leases
// (etcd's): a key put with a lease (PutLeased) is deleted by the store,
// in one transaction of its own, when the lease ends, because it was
// revoked or because its holder stopped renewing it for the lease's TTL
// (it died, paused or lost the network). The lock library's Lease
// strategy judges a holder by it, across hosts: a slot key bound to a
// lease exists only while its holder renews the lease.
type Leaser interface {
	// Grant creates a lease and keeps it alive until Revoke, or until it
	// can no longer be renewed.
	Grant(ctx context.Context) (Lease, error)
}

// Lease is a lease of a Leaser backend, kept alive by the process that
// was granted it.
type Lease interface {
	// ID is the lease's id, for Op.Lease.
	ID() int64
	// Done is closed once the lease has ended or its renewals stopped
	// getting through for longer than its TTL: the keys bound to it are
	// gone, or soon will be.
	Done() <-chan struct{}
	// Revoke ends the lease, deleting the keys bound to it.
	Revoke(ctx context.Context) error
}
