package record

import (
	"bytes"
	"container/heap"
	"fmt"
	"slices"
	"strconv"
)

// LeaseID names a lease: the revision of the record that granted it, so
// never 0 and never given twice. Part of the on-disk format.
type LeaseID uint64

// String formats id in decimal.
func (id LeaseID) String() string { return strconv.FormatUint(uint64(id), 10) }

// LeaseAction is what a lease record does. Part of the on-disk format; 0
// is invalid (and, in a Record, means "not a lease record").
type LeaseAction uint8

// Lease actions, part of the on-disk format.
const (
	LeaseGrant     LeaseAction = 1 // create a lease with a TTL and a deadline
	LeaseKeepAlive LeaseAction = 2 // move a lease's deadline
	LeaseRevoke    LeaseAction = 3 // end a lease at a client's request
	LeaseExpire    LeaseAction = 4 // end a lease whose deadline passed
)

// String names the action as the CLI prints it.
func (a LeaseAction) String() string {
	switch a {
	case LeaseGrant:
		return "grant"
	case LeaseKeepAlive:
		return "keep-alive"
	case LeaseRevoke:
		return "revoke"
	case LeaseExpire:
		return "expire"
	}
	return fmt.Sprintf("lease-action(%d)", uint8(a))
}

// LeaseChange is the change a lease record makes.
type LeaseChange struct {
	Action LeaseAction
	ID     LeaseID
	// TTL is the lease's time to live in nanoseconds: a grant's only.
	TTL int64
	// Deadline is the instant the lease ends, in Unix nanoseconds: a
	// grant's and a keep-alive's only.
	Deadline int64
}

// Lease is a live lease and the keys bound to it.
type Lease struct {
	ID       LeaseID
	TTL      int64    // nanoseconds, as granted
	Deadline int64    // Unix nanoseconds: the lease ends once the clock reads it
	Keys     [][]byte // the keys bound to it, in ascending order
}

// Leases is the lease table that the records build beside the Map: the
// live leases, the keys bound to each, and their deadlines in order. It
// applies what each record does to leases (Apply) and checks the rules of
// FORMAT.md's "Leases" as it does. It is not safe for concurrent writers;
// its readers need no more than a read lock against its writer.
//
// A table that holds no lease costs a record nothing but a check of two
// lengths, so a store that never grants one does not pay for leases.
type Leases struct {
	byID map[LeaseID]*leaseState
	keys map[string]LeaseID // every bound key and its lease
	// byDeadline orders the leases by deadline. It holds an item per
	// grant and keep-alive; the items of a lease that ended or whose
	// deadline moved are stale, and dropped once they reach the top
	// (tidy), so the top is always live.
	byDeadline deadlineHeap
}

type leaseState struct {
	ttl, deadline int64
	keys          map[string]struct{}
}

// NewLeases returns an empty table.
func NewLeases() *Leases {
	return &Leases{byID: map[LeaseID]*leaseState{}, keys: map[string]LeaseID{}}
}

// Len returns the number of live leases.
func (l *Leases) Len() int { return len(l.byID) }

// Bound returns the number of keys bound to a lease.
func (l *Leases) Bound() int { return len(l.keys) }

// Of returns the lease key is bound to, or 0.
func (l *Leases) Of(key []byte) LeaseID {
	if len(l.keys) == 0 {
		return 0
	}
	return l.keys[string(key)]
}

// Deadline returns the deadline of lease id, and false when it is not
// live.
func (l *Leases) Deadline(id LeaseID) (int64, bool) {
	s, ok := l.byID[id]
	if !ok {
		return 0, false
	}
	return s.deadline, true
}

// Info returns the TTL and the deadline of lease id, and false when it
// is not live.
func (l *Leases) Info(id LeaseID) (ttl, deadline int64, ok bool) {
	s, ok := l.byID[id]
	if !ok {
		return 0, 0, false
	}
	return s.ttl, s.deadline, true
}

// Get returns lease id with its keys, copied, and false when it is not
// live.
func (l *Leases) Get(id LeaseID) (Lease, bool) {
	s, ok := l.byID[id]
	if !ok {
		return Lease{}, false
	}
	return s.lease(id), true
}

func (s *leaseState) lease(id LeaseID) Lease {
	le := Lease{ID: id, TTL: s.ttl, Deadline: s.deadline, Keys: make([][]byte, 0, len(s.keys))}
	for k := range s.keys {
		le.Keys = append(le.Keys, []byte(k))
	}
	slices.SortFunc(le.Keys, bytes.Compare)
	return le
}

// All returns every live lease in ascending id order, with its keys,
// copied.
func (l *Leases) All() []Lease {
	ids := make([]LeaseID, 0, len(l.byID))
	for id := range l.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]Lease, len(ids))
	for i, id := range ids {
		out[i] = l.byID[id].lease(id)
	}
	return out
}

// Next returns the live lease with the earliest deadline (the lowest id
// among equal ones) and that deadline; false when there is none.
func (l *Leases) Next() (LeaseID, int64, bool) {
	if len(l.byDeadline) == 0 {
		return 0, 0, false
	}
	top := l.byDeadline[0]
	return top.id, top.deadline, true
}

// Due returns the live leases whose deadline is at or before now, in the
// order they end (by deadline, then id).
func (l *Leases) Due(now int64) []LeaseID {
	if id, d, ok := l.Next(); !ok || d > now {
		return nil
	} else if len(l.byDeadline) == 1 {
		return []LeaseID{id}
	}
	var due []deadlineItem
	for id, s := range l.byID {
		if s.deadline <= now {
			due = append(due, deadlineItem{deadline: s.deadline, id: id})
		}
	}
	slices.SortFunc(due, func(a, b deadlineItem) int {
		if c := compareInt64(a.deadline, b.deadline); c != 0 {
			return c
		}
		return compareInt64(int64(a.id), int64(b.id))
	})
	ids := make([]LeaseID, len(due))
	for i, d := range due {
		ids[i] = d.id
	}
	return ids
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// DueKeys returns the keys bound to the leases whose deadline is at or
// before now: what a read hides before their expire is committed. It is
// nil when no lease is due.
func (l *Leases) DueKeys(now int64) map[string]struct{} {
	if _, d, ok := l.Next(); !ok || d > now {
		return nil
	}
	out := map[string]struct{}{}
	for _, s := range l.byID {
		if s.deadline <= now {
			for k := range s.keys {
				out[k] = struct{}{}
			}
		}
	}
	return out
}

// Hidden reports whether key is bound to a lease whose deadline is at or
// before now: a read treats it as absent.
func (l *Leases) Hidden(key []byte, now int64) bool {
	if _, d, ok := l.Next(); !ok || d > now {
		return false
	}
	id := l.keys[string(key)]
	if id == 0 {
		return false
	}
	return l.byID[id].deadline <= now
}

// Clone returns a copy that shares nothing with l.
func (l *Leases) Clone() *Leases {
	c := &Leases{byID: make(map[LeaseID]*leaseState, len(l.byID)), keys: make(map[string]LeaseID, len(l.keys)),
		byDeadline: slices.Clone(l.byDeadline)}
	for id, s := range l.byID {
		keys := make(map[string]struct{}, len(s.keys))
		for k := range s.keys {
			keys[k] = struct{}{}
		}
		c.byID[id] = &leaseState{ttl: s.ttl, deadline: s.deadline, keys: keys}
	}
	for k, id := range l.keys {
		c.keys[k] = id
	}
	return c
}

// Load adds a lease with its keys, as a snapshot holds it. It fails,
// changing nothing, when the id is 0 or live already, or a key is bound
// already.
func (l *Leases) Load(le *Lease) error {
	if le.ID == 0 {
		return fmt.Errorf("%w: lease id 0", ErrCorrupt)
	}
	if _, ok := l.byID[le.ID]; ok {
		return fmt.Errorf("%w: lease %d loaded twice", ErrCorrupt, le.ID)
	}
	for _, k := range le.Keys {
		if id, ok := l.keys[string(k)]; ok {
			return fmt.Errorf("%w: key %q bound to leases %d and %d", ErrCorrupt, k, id, le.ID)
		}
	}
	s := &leaseState{ttl: le.TTL, deadline: le.Deadline, keys: make(map[string]struct{}, len(le.Keys))}
	for _, k := range le.Keys {
		if _, dup := s.keys[string(k)]; dup {
			return fmt.Errorf("%w: key %q bound to lease %d twice", ErrCorrupt, k, le.ID)
		}
		s.keys[string(k)] = struct{}{}
	}
	for k := range s.keys {
		l.keys[k] = le.ID
	}
	l.byID[le.ID] = s
	heap.Push(&l.byDeadline, deadlineItem{deadline: le.Deadline, id: le.ID})
	return nil
}

// Touches reports whether r changes the table, or needs checking against
// it: a lease record, a put on a lease, or an operation on a key bound to
// a lease.
func (l *Leases) Touches(r *Record) bool {
	if r.Lease.Action != 0 {
		return true
	}
	for i := range r.Ops {
		if r.Ops[i].Lease != 0 {
			return true
		}
	}
	if len(l.keys) == 0 {
		return false
	}
	for i := range r.Ops {
		if _, ok := l.keys[string(r.Ops[i].Key)]; ok {
			return true
		}
	}
	return false
}

// Check reports whether r follows the rules of FORMAT.md's "Leases"
// against the table, changing nothing: its error wraps ErrCorrupt and
// names the rule. Apply checks first.
func (l *Leases) Check(r *Record) error {
	lc := &r.Lease
	switch lc.Action {
	case 0:
		for i := range r.Ops {
			if id := r.Ops[i].Lease; id != 0 {
				if _, ok := l.byID[id]; !ok {
					return fmt.Errorf("%w: put of %q on lease %d, which is not live", ErrCorrupt, r.Ops[i].Key, id)
				}
			}
		}
		return nil
	case LeaseGrant:
		if _, ok := l.byID[lc.ID]; ok {
			return fmt.Errorf("%w: grant of lease %d, which is live already", ErrCorrupt, lc.ID)
		}
		return nil
	}
	s, ok := l.byID[lc.ID]
	if !ok {
		return fmt.Errorf("%w: %s of lease %d, which is not live", ErrCorrupt, lc.Action, lc.ID)
	}
	if lc.Action == LeaseKeepAlive {
		return nil
	}
	if len(r.Ops) != len(s.keys) {
		return fmt.Errorf("%w: %s of lease %d deletes %d keys; %d are bound to it", ErrCorrupt, lc.Action, lc.ID, len(r.Ops), len(s.keys))
	}
	for i := range r.Ops {
		if _, ok := s.keys[string(r.Ops[i].Key)]; !ok {
			return fmt.Errorf("%w: %s of lease %d deletes %q, which is not bound to it", ErrCorrupt, lc.Action, lc.ID, r.Ops[i].Key)
		}
	}
	return nil
}

// Apply applies what r does to leases: a lease record's grant, renewal
// or end (the end unbinds its keys; the Map deletes them), a put on a
// lease's binding, a plain put's or a delete's unbinding. An add keeps
// its key's binding. When r breaks a rule (see Check) Apply returns the
// error and changes nothing.
func (l *Leases) Apply(r *Record) error {
	if !l.Touches(r) {
		return nil
	}
	if err := l.Check(r); err != nil {
		return err
	}
	lc := &r.Lease
	switch lc.Action {
	case LeaseGrant:
		l.byID[lc.ID] = &leaseState{ttl: lc.TTL, deadline: lc.Deadline, keys: map[string]struct{}{}}
		heap.Push(&l.byDeadline, deadlineItem{deadline: lc.Deadline, id: lc.ID})
		return nil
	case LeaseKeepAlive:
		l.byID[lc.ID].deadline = lc.Deadline
		heap.Push(&l.byDeadline, deadlineItem{deadline: lc.Deadline, id: lc.ID})
		l.tidy()
		return nil
	case LeaseRevoke, LeaseExpire:
		for k := range l.byID[lc.ID].keys {
			delete(l.keys, k)
		}
		delete(l.byID, lc.ID)
		l.tidy()
		return nil
	}
	for i := range r.Ops {
		op := &r.Ops[i]
		switch {
		case op.Kind == KindAdd:
		case op.Kind == KindPut && op.Lease != 0:
			l.unbind(op.Key)
			ks := string(op.Key)
			l.byID[op.Lease].keys[ks] = struct{}{}
			l.keys[ks] = op.Lease
		default:
			l.unbind(op.Key)
		}
	}
	return nil
}

// unbind takes key off the lease it is bound to, if any.
func (l *Leases) unbind(key []byte) {
	if len(l.keys) == 0 {
		return
	}
	id, ok := l.keys[string(key)]
	if !ok {
		return
	}
	delete(l.byID[id].keys, string(key))
	delete(l.keys, string(key))
}

// tidy drops the stale items at the top of byDeadline, and rebuilds it
// when stale items (of renewed leases, buried below the top) outnumber
// the live ones.
func (l *Leases) tidy() {
	h := &l.byDeadline
	if len(*h) > 2*len(l.byID)+16 {
		live := (*h)[:0]
		for _, it := range *h {
			if s, ok := l.byID[it.id]; ok && s.deadline == it.deadline {
				live = append(live, it)
			}
		}
		clear((*h)[len(live):])
		*h = live
		heap.Init(h)
	}
	for len(*h) > 0 {
		top := (*h)[0]
		if s, ok := l.byID[top.id]; ok && s.deadline == top.deadline {
			return
		}
		heap.Pop(h)
	}
}

// deadlineItem is a lease's deadline as byDeadline orders it.
type deadlineItem struct {
	deadline int64
	id       LeaseID
}

// deadlineHeap is a min-heap of deadlines, then ids (container/heap).
type deadlineHeap []deadlineItem

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].id < h[j].id
}
func (h deadlineHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)   { *h = append(*h, x.(deadlineItem)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
