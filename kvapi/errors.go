package kvapi

import "errors"

// ErrUnsupported is returned, and nothing is written, when a backend
// cannot carry out a request with the embedded store's semantics: on
// etcd, a transaction whose branch writes one key twice.
var ErrUnsupported = errors.New("kvapi: not supported by this backend")

// ErrUnknownOutcome is matched by the error of a write whose outcome is
// unknown: it may or may not have committed (a timeout or a lost
// connection to an etcd cluster, a store that failed and refuses writes,
// kv.ErrFailed). Read the state again before acting on it; the helpers
// of this package never retry such a write.
var ErrUnknownOutcome = errors.New("kvapi: outcome of the write unknown")
