package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
)

// LeaseID names a lease: the revision of the record that granted it, so
// never 0 and never given twice, across restarts and repairs.
type LeaseID = record.LeaseID

// MaxLeaseTTL is the longest TTL Grant accepts: a century, which keeps
// every deadline inside the int64 nanoseconds the log holds.
const MaxLeaseTTL = 100 * 365 * 24 * time.Hour

// ErrLeaseNotFound is matched by the error of an operation on a lease
// that is not live: never granted, revoked, or ended at its deadline
// (then ErrLeaseExpired matches too). See LeaseError.
var ErrLeaseNotFound = errors.New("kv: lease not found")

// ErrLeaseExpired is matched by the error of an operation on a lease
// whose deadline has passed, as far as the store can tell: one whose
// deadline it finds past, or that it expired since it was opened.
var ErrLeaseExpired = errors.New("kv: lease expired")

// LeaseError is the error of an operation on a lease that is not live. It
// matches ErrLeaseNotFound, and ErrLeaseExpired when Expired is set.
type LeaseError struct {
	ID LeaseID
	// Expired is set when the lease ended at its deadline, as far as this
	// store knows (it remembers the leases it ended since it was opened,
	// the latest thousand); Deadline is that deadline.
	Expired  bool
	Deadline time.Time
}

func (e *LeaseError) Error() string {
	if e.Expired {
		return fmt.Sprintf("kv: lease %d expired at its deadline, %s", e.ID, e.Deadline.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("kv: lease %d not found (never granted, revoked, or expired)", e.ID)
}

// Is makes a LeaseError match ErrLeaseNotFound, and ErrLeaseExpired when
// it says so.
func (e *LeaseError) Is(target error) bool {
	return target == ErrLeaseNotFound || (e.Expired && target == ErrLeaseExpired)
}

// LeaseInfo is a live lease.
type LeaseInfo struct {
	ID LeaseID
	// TTL is the time to live it was granted with: each renewal moves its
	// deadline to at least the renewal's time plus TTL.
	TTL time.Duration
	// Deadline is the wall-clock instant the lease ends at, as logged: the
	// store deletes its keys then, and reads treat them as absent from
	// then on. A restart does not move it.
	Deadline time.Time
	// Keys are the keys bound to it, in ascending order (Lease and Leases
	// fill them; Grant and KeepAlive do not).
	Keys [][]byte
}

// Clock is where a store reads the time for lease deadlines: wall-clock
// time, since deadlines are absolute instants that outlive the process
// (FORMAT.md, "Leases"). Tests give a store a clock they move by hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed on this
	// clock.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// leaseGrace is the lease-grace bug variant (internal/variant): every
// lease recovered gets the open's time plus its TTL as its deadline, in
// memory. The correct store keeps the deadlines the log holds.
func leaseGrace(fsys vfs.FS, leases *record.Leases, clock Clock) {
	if variant.Of(fsys) != variant.LeaseGrace {
		return
	}
	now := clock.Now().UnixNano()
	for _, le := range leases.All() {
		r := record.Record{Lease: record.LeaseChange{Action: record.LeaseKeepAlive, ID: le.ID, Deadline: now + le.TTL}}
		leases.Apply(&r)
	}
}

// leaseReq is what a request for a lease operation asks, and, for a
// grant and a keep-alive, what it got.
type leaseReq struct {
	action record.LeaseAction
	id     LeaseID
	ttl    time.Duration
	info   LeaseInfo // the lease after a grant or a keep-alive
}

// leaseWrite commits a lease operation and returns its outcome.
func (s *Store) leaseWrite(lr *leaseReq) (Revision, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	r := &request{lease: lr}
	err := s.write(r)
	return r.res.Revision, err
}

// Grant creates a lease with time to live ttl and returns its id: its
// deadline is the store's clock plus ttl, logged and durable (under
// Always) when Grant returns. Bind keys to it with PutLease, or with
// PutOp(...).WithLease(id) in a transaction; renew it with KeepAlive or
// KeepAliveLoop; end it with Revoke. Once the clock reads its deadline
// the store commits its expiry, which deletes its keys (a record of its
// own that watchers see as deletes), and until then every read treats
// them as absent.
//
// The deadline is an absolute wall-clock time and survives the process:
// a store opened after it passed, by this process or another, commits
// the expiry before any write. A restart grants no grace (FORMAT.md,
// "Leases", says why). ttl must be above 0 and at most MaxLeaseTTL.
func (s *Store) Grant(ttl time.Duration) (LeaseID, error) {
	if ttl <= 0 || ttl > MaxLeaseTTL {
		return 0, fmt.Errorf("%w: lease TTL %v, want above 0 and at most %v", ErrInvalid, ttl, MaxLeaseTTL)
	}
	lr := &leaseReq{action: record.LeaseGrant, ttl: ttl}
	_, err := s.leaseWrite(lr)
	return lr.info.ID, err
}

// KeepAlive renews lease id: its deadline becomes the store's clock plus
// its TTL, or stays where it is if that is later (a renewal never moves
// a deadline earlier). It returns the lease with its new deadline, durable
// when KeepAlive returns (under Always): a holder may rely on it until
// then. A lease whose deadline has passed cannot be renewed: the error
// matches ErrLeaseNotFound (and ErrLeaseExpired).
func (s *Store) KeepAlive(id LeaseID) (LeaseInfo, error) {
	lr := &leaseReq{action: record.LeaseKeepAlive, id: id}
	_, err := s.leaseWrite(lr)
	if err != nil {
		return LeaseInfo{}, err
	}
	return lr.info, nil
}

// Revoke ends lease id before its deadline: its keys are deleted at the
// revision it returns, in one record with the lease's end. The error
// matches ErrLeaseNotFound when the lease is not live.
func (s *Store) Revoke(id LeaseID) (Revision, error) {
	return s.leaseWrite(&leaseReq{action: record.LeaseRevoke, id: id})
}

// PutLease sets key to value and binds it to lease id, as Put does
// otherwise: the key is deleted when the lease ends. A later Put of the
// key without a lease, or a Delete, unbinds it; an Add keeps its lease.
// The error matches ErrLeaseNotFound, and nothing is written, when the
// lease is not live.
func (s *Store) PutLease(key, value []byte, id LeaseID) (Revision, error) {
	if id == 0 {
		return 0, fmt.Errorf("%w: lease 0", ErrInvalid)
	}
	r := newRequest()
	r.single = true
	r.one[0] = PutOp(key, value).WithLease(id)
	r.txn.Then = r.one[:]
	err := s.write(r)
	rev := r.res.Revision
	r.release()
	return rev, err
}

// KeepAliveLoop renews lease id every third of its TTL, on the store's
// clock, until ctx ends (it returns ctx's error) or a renewal fails (it
// returns that error: one matching ErrLeaseNotFound once the lease has
// ended, ErrClosed, ErrFailed). Run it on a goroutine of its own; a
// holder whose loop returned must assume its keys gone at the deadline
// of the last renewal.
func (s *Store) KeepAliveLoop(ctx context.Context, id LeaseID) error {
	for {
		info, err := s.KeepAlive(id)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.clock.After(max(info.TTL/3, time.Millisecond)):
		}
	}
}

// Lease returns lease id with the keys bound to it. A lease whose
// deadline has passed is not live, even before its expiry is committed:
// the error then matches ErrLeaseExpired (and ErrLeaseNotFound).
func (s *Store) Lease(id LeaseID) (LeaseInfo, error) {
	if s.closed.Load() {
		return LeaseInfo{}, ErrClosed
	}
	now := s.clock.Now().UnixNano()
	s.mu.RLock()
	le, ok := s.leases.Get(id)
	s.mu.RUnlock()
	switch {
	case !ok:
		return LeaseInfo{}, s.leaseNotFound(id)
	case le.Deadline <= now:
		return LeaseInfo{}, &LeaseError{ID: id, Expired: true, Deadline: time.Unix(0, le.Deadline)}
	}
	return leaseInfo(&le), nil
}

// Leases returns every live lease, in ascending id order, with the keys
// bound to each. A lease whose deadline has passed is left out, even
// before its expiry is committed.
func (s *Store) Leases() ([]LeaseInfo, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	now := s.clock.Now().UnixNano()
	s.mu.RLock()
	all := s.leases.All()
	s.mu.RUnlock()
	out := make([]LeaseInfo, 0, len(all))
	for i := range all {
		if all[i].Deadline > now {
			out = append(out, leaseInfo(&all[i]))
		}
	}
	return out, nil
}

func leaseInfo(le *record.Lease) LeaseInfo {
	return LeaseInfo{ID: le.ID, TTL: time.Duration(le.TTL), Deadline: time.Unix(0, le.Deadline), Keys: le.Keys}
}

// leaseNotFound is the error for lease id, which is not live: expired, if
// this store ended it at its deadline.
func (sh *shared) leaseNotFound(id LeaseID) error {
	sh.endedMu.Lock()
	d, ok := sh.expired[id]
	sh.endedMu.Unlock()
	if ok {
		return &LeaseError{ID: id, Expired: true, Deadline: time.Unix(0, d)}
	}
	return &LeaseError{ID: id}
}

// rememberExpired notes that the store ended lease id at its deadline,
// for the errors of the operations on it that come later; it keeps the
// latest expiredMemory.
func (sh *shared) rememberExpired(id LeaseID, deadline int64) {
	sh.endedMu.Lock()
	defer sh.endedMu.Unlock()
	if sh.expired == nil {
		sh.expired = map[LeaseID]int64{}
	}
	sh.expired[id] = deadline
	sh.expiredOrder = append(sh.expiredOrder, id)
	if len(sh.expiredOrder) > expiredMemory {
		delete(sh.expired, sh.expiredOrder[0])
		sh.expiredOrder = sh.expiredOrder[1:]
	}
}

// expiredMemory is how many expired leases a store remembers.
const expiredMemory = 1024

// hidden reports whether a read at now must treat key as absent: it is
// bound to a lease whose deadline has passed, its expiry not committed
// yet. Called under mu.
func (sh *shared) hidden(key []byte) bool {
	_, d, ok := sh.leases.Next()
	if !ok {
		return false
	}
	now := sh.clock.Now().UnixNano()
	return d <= now && sh.leases.Hidden(key, now)
}

// dueKeys returns the keys a scan starting now must leave out (see
// hidden), or nil. Called under mu.
func (sh *shared) dueKeys() map[string]struct{} {
	_, d, ok := sh.leases.Next()
	if !ok {
		return nil
	}
	if now := sh.clock.Now().UnixNano(); d <= now {
		return sh.leases.DueKeys(now)
	}
	return nil
}
