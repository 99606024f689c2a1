package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Revision numbers committed records: each is one more than the one
// before, starting at 1. A key carries the revisions that created and last
// changed it. Revisions never go backwards, so they serve as fencing
// tokens.
type Revision uint64

// String formats r in decimal.
func (r Revision) String() string { return strconv.FormatUint(uint64(r), 10) }

// MaxRevision is the largest revision a store can hold and continue from:
// 2^63−1, the largest int64. Part of the on-disk format: a record, a
// snapshot or a snapshot entry with a revision above it is corrupt.
// Revisions are compared as int64 (a transaction's Compare.Num, as
// kv.CompareModRev and kv.CompareCreateRev build it), so every revision
// must fit in one; and no store gets near it by writing (at a million
// records a second it takes 292,000 years), so a revision above it can
// only come from a damaged or crafted file.
const MaxRevision Revision = math.MaxInt64

// MinPayload is the size of the smallest record payload (a skip: kind and
// revision). Part of the on-disk format: n bytes of log hold at most
// n/(MinPayload+the log's record header) records, which bounds the
// revisions a damaged stretch of log can have held.
const MinPayload = 9

// Kind is the first byte of a record payload. Part of the on-disk format;
// 0 is invalid.
type Kind uint8

// Record and operation kinds, part of the on-disk format.
const (
	KindPut    Kind = 1 // set a key to a value
	KindDelete Kind = 2 // remove a key
	KindAdd    Kind = 3 // add a signed delta to a decimal integer value
	KindTxn    Kind = 4 // compares, then the operations of the branch taken
	// KindSkip changes nothing: it moves the revision past revisions that
	// a repair cut out of the log, which no later record may reuse.
	KindSkip Kind = 5
	// KindPutLease is a put that binds its key to a lease. In memory it is
	// a KindPut whose Op.Lease is set: only the encoding has this kind.
	KindPutLease Kind = 6
	// KindLease grants, renews or ends a lease (Record.Lease); ending one
	// deletes the keys bound to it (Record.Ops).
	KindLease Kind = 7
)

// String names the kind as the CLI prints it.
func (k Kind) String() string {
	switch k {
	case KindPut:
		return "put"
	case KindDelete:
		return "del"
	case KindAdd:
		return "add"
	case KindTxn:
		return "txn"
	case KindSkip:
		return "skip"
	case KindPutLease:
		return "put-lease"
	case KindLease:
		return "lease"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op is one change to one key.
type Op struct {
	Kind  Kind // KindPut, KindDelete or KindAdd
	Key   []byte
	Value []byte // KindPut
	Delta int64  // KindAdd
	// Lease, for a KindPut, binds the key to that lease (logged as
	// KindPutLease); 0 binds it to none.
	Lease LeaseID
}

// WithLease returns op, a put, binding its key to the lease id: the key
// is deleted when the lease ends (see FORMAT.md, "Leases").
func (op Op) WithLease(id LeaseID) Op {
	op.Lease = id
	return op
}

// logKind is the kind op is logged as.
func (op *Op) logKind() Kind {
	if op.Kind == KindPut && op.Lease != 0 {
		return KindPutLease
	}
	return op.Kind
}

// Target is what a Compare looks at. Part of the on-disk format.
type Target uint8

// Compare targets.
const (
	TargetValue     Target = 1 // the value's bytes
	TargetCreateRev Target = 2 // the revision that created the key (0 if absent)
	TargetModRev    Target = 3 // the revision that last changed the key (0 if absent)
	TargetVersion   Target = 4 // changes since creation (0 if absent)
	TargetExists    Target = 5 // 1 if the key exists, 0 if not
)

// Cmp is the relation of a Compare. Part of the on-disk format.
type Cmp uint8

// Compare relations.
const (
	CmpEqual    Cmp = 1
	CmpNotEqual Cmp = 2
	CmpLess     Cmp = 3
	CmpGreater  Cmp = 4
)

// Compare is one guard of a transaction.
type Compare struct {
	Key    []byte
	Target Target
	Cmp    Cmp
	Value  []byte // for TargetValue
	Num    int64  // for the other targets
}

// Record is one committed change: one operation, or a transaction that
// applies several atomically. Every record has its own revision.
type Record struct {
	Revision Revision
	// Txn marks a transaction record; otherwise Ops holds exactly one op.
	Txn bool
	// Compares are the guards the transaction was evaluated against when
	// it committed. They are logged for inspection and never re-evaluated
	// on replay: Ops are the operations of the branch that was taken.
	Compares  []Compare
	Succeeded bool // which branch of the transaction was taken
	Ops       []Op
	// Skip marks a record that changes nothing and has no Ops: its
	// revision may be more than one past the previous record's, and the
	// revisions between are never used (see KindSkip).
	Skip bool
	// Lease, when its Action is set, makes this a lease record
	// (KindLease): a grant, keep-alive, revoke or expire. The Ops of a
	// revoke or an expire are the deletes of the keys bound to the lease,
	// in ascending key order; the others have none.
	Lease LeaseChange
}

// Payload layout, all integers little-endian:
//
//	uint8  kind
//	uint64 revision (1 to MaxRevision)
//	put:    op body
//	del:    op body
//	add:    op body
//	txn:    uint8 flags (bit 0: succeeded), uint32 n, n compares,
//	        uint32 m, m ops (each uint8 kind + op body)
//	skip:   nothing more
//	put-lease: op body
//	lease:  uint8 action, uint64 id, int64 ttl, int64 deadline,
//	        uint32 n, n times (uint32 keylen, key)
//	op body: uint32 keylen, key, then put: uint32 vallen, value;
//	        put-lease: uint32 vallen, value, uint64 lease;
//	        add: int64 delta; del: nothing
//	compare: uint8 target, uint8 cmp, uint32 keylen, key, then
//	        value target: uint32 len, bytes; others: int64

// Append encodes r and appends it to buf.
func Append(buf []byte, r *Record) []byte {
	if r.Skip {
		buf = append(buf, byte(KindSkip))
		return binary.LittleEndian.AppendUint64(buf, uint64(r.Revision))
	}
	if r.Lease.Action != 0 {
		buf = append(buf, byte(KindLease))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Revision))
		buf = append(buf, byte(r.Lease.Action))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Lease.ID))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Lease.TTL))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Lease.Deadline))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.Ops)))
		for i := range r.Ops {
			buf = appendBytes(buf, r.Ops[i].Key)
		}
		return buf
	}
	if !r.Txn && len(r.Ops) == 1 {
		buf = append(buf, byte(r.Ops[0].logKind()))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Revision))
		return appendOpBody(buf, &r.Ops[0])
	}
	buf = append(buf, byte(KindTxn))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Revision))
	var flags byte
	if r.Succeeded {
		flags |= 1
	}
	buf = append(buf, flags)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.Compares)))
	for i := range r.Compares {
		c := &r.Compares[i]
		buf = append(buf, byte(c.Target), byte(c.Cmp))
		buf = appendBytes(buf, c.Key)
		if c.Target == TargetValue {
			buf = appendBytes(buf, c.Value)
		} else {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(c.Num))
		}
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.Ops)))
	for i := range r.Ops {
		buf = append(buf, byte(r.Ops[i].logKind()))
		buf = appendOpBody(buf, &r.Ops[i])
	}
	return buf
}

// Size returns len(Append(nil, r)), the size of r's encoding, without
// encoding it: a writer checks a record against the log's maximum record
// size before it commits to it.
func Size(r *Record) int {
	const head = 1 + 8 // kind, revision
	if r.Skip {
		return head
	}
	if r.Lease.Action != 0 {
		n := head + 1 + 8 + 8 + 8 + 4 // action, id, ttl, deadline, key count
		for i := range r.Ops {
			n += 4 + len(r.Ops[i].Key)
		}
		return n
	}
	if !r.Txn && len(r.Ops) == 1 {
		return head + opBodySize(&r.Ops[0])
	}
	n := head + 1 + 4 + 4 // flags, compare count, op count
	for i := range r.Compares {
		c := &r.Compares[i]
		n += 2 + 4 + len(c.Key) // target, cmp, key
		if c.Target == TargetValue {
			n += 4 + len(c.Value)
		} else {
			n += 8
		}
	}
	for i := range r.Ops {
		n += 1 + opBodySize(&r.Ops[i])
	}
	return n
}

// opBodySize is the size appendOpBody gives op.
func opBodySize(op *Op) int {
	n := 4 + len(op.Key)
	switch op.Kind {
	case KindPut:
		n += 4 + len(op.Value)
		if op.Lease != 0 {
			n += 8
		}
	case KindAdd:
		n += 8
	}
	return n
}

func appendBytes(buf, b []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
	return append(buf, b...)
}

func appendOpBody(buf []byte, op *Op) []byte {
	buf = appendBytes(buf, op.Key)
	switch op.Kind {
	case KindPut:
		buf = appendBytes(buf, op.Value)
		if op.Lease != 0 {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(op.Lease))
		}
	case KindAdd:
		buf = binary.LittleEndian.AppendUint64(buf, uint64(op.Delta))
	}
	return buf
}

// decoder reads a payload; the first error sticks.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b)-d.off < n {
		d.fail("need %d bytes, have %d", n, len(d.b)-d.off)
		return false
	}
	return true
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// bytes returns a subslice of the payload (no copy) with its capacity cut,
// so that appends to it never write into the payload.
func (d *decoder) bytes() []byte {
	n := d.u32()
	if !d.need(int(min(n, math.MaxInt32))) || n > math.MaxInt32 {
		d.fail("length %d past the end", n)
		return nil
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v
}

func (d *decoder) opBody(k Kind) Op {
	op := Op{Kind: k, Key: d.bytes()}
	switch k {
	case KindPut:
		op.Value = d.bytes()
	case KindPutLease:
		op.Kind, op.Value = KindPut, d.bytes()
		if op.Lease = LeaseID(d.u64()); op.Lease == 0 && d.err == nil {
			d.fail("put on lease 0")
		}
	case KindAdd:
		op.Delta = int64(d.u64())
	case KindDelete:
	default:
		d.fail("unknown operation kind %d", uint8(k))
	}
	return op
}

// count reads a uint32 element count and checks it against the bytes left,
// given that each element takes at least minSize bytes, so that a damaged
// count cannot make Decode allocate past the payload's size.
func (d *decoder) count(minSize int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(minSize) > uint64(len(d.b)-d.off) {
		d.fail("count %d past the end", n)
		return 0
	}
	return int(n)
}

// Decode parses a payload written by Append. Byte slices in the result
// alias p; copy them to keep them past p's lifetime.
func Decode(p []byte) (Record, error) {
	var r Record
	if err := DecodeInto(p, &r); err != nil {
		return Record{}, err
	}
	return r, nil
}

// DecodeInto is Decode into r, reusing the capacity of r.Ops and
// r.Compares, so that a replay allocates nothing per record once they
// have grown to its biggest. On error r is undefined.
func DecodeInto(p []byte, r *Record) error {
	d := decoder{b: p}
	ops, cmps := r.Ops[:0], r.Compares[:0]
	*r = Record{}
	k := Kind(d.u8())
	r.Revision = Revision(d.u64())
	switch k {
	case KindPut, KindDelete, KindAdd, KindPutLease:
		r.Ops = append(ops, d.opBody(k))
	case KindSkip:
		r.Skip = true
	case KindLease:
		r.Ops = d.lease(r, ops)
	case KindTxn:
		r.Txn = true
		flags := d.u8()
		if flags&^1 != 0 {
			d.fail("unknown transaction flags %#x", flags)
		}
		r.Succeeded = flags&1 != 0
		if n := d.count(10); n > 0 {
			if cap(cmps) >= n {
				r.Compares = cmps[:n]
				clear(r.Compares) // each compare sets only some fields
			} else {
				r.Compares = make([]Compare, n)
			}
			for i := range r.Compares {
				c := &r.Compares[i]
				c.Target, c.Cmp = Target(d.u8()), Cmp(d.u8())
				c.Key = d.bytes()
				switch {
				case c.Target == TargetValue:
					c.Value = d.bytes()
				case c.Target >= TargetCreateRev && c.Target <= TargetExists:
					c.Num = int64(d.u64())
				default:
					d.fail("unknown compare target %d", uint8(c.Target))
				}
				if c.Cmp < CmpEqual || c.Cmp > CmpGreater {
					d.fail("unknown compare relation %d", uint8(c.Cmp))
				}
			}
		}
		if n := d.count(5); n > 0 {
			if cap(ops) >= n {
				r.Ops = ops[:n] // a replay of transactions allocates once
			} else {
				r.Ops = make([]Op, n)
			}
			for i := range r.Ops {
				r.Ops[i] = d.opBody(Kind(d.u8()))
			}
		}
	default:
		d.fail("unknown record kind %d", uint8(k))
	}
	if d.err == nil && d.off != len(p) {
		d.fail("%d trailing bytes", len(p)-d.off)
	}
	if d.err != nil {
		return d.err
	}
	if r.Revision == 0 {
		return fmt.Errorf("%w: revision 0", ErrCorrupt)
	}
	if r.Revision > MaxRevision {
		return fmt.Errorf("%w: revision %d past the largest a store can hold, %d", ErrCorrupt, r.Revision, MaxRevision)
	}
	if r.Lease.Action == LeaseGrant && LeaseID(r.Revision) != r.Lease.ID {
		return fmt.Errorf("%w: grant of lease %d at revision %d: a lease's id is its grant's revision", ErrCorrupt, r.Lease.ID, r.Revision)
	}
	return nil
}

// lease reads a lease record's body into r.Lease and returns its deletes,
// in ops (whose capacity it reuses).
func (d *decoder) lease(r *Record, ops []Op) []Op {
	l := &r.Lease
	l.Action = LeaseAction(d.u8())
	l.ID = LeaseID(d.u64())
	l.TTL = int64(d.u64())
	l.Deadline = int64(d.u64())
	n := d.count(4)
	if d.err != nil {
		return nil
	}
	if l.ID == 0 {
		d.fail("lease id 0")
	}
	switch l.Action {
	case LeaseGrant:
		if l.TTL <= 0 || l.Deadline <= 0 || n != 0 {
			d.fail("grant with ttl %d, deadline %d, %d keys", l.TTL, l.Deadline, n)
		}
	case LeaseKeepAlive:
		if l.TTL != 0 || l.Deadline <= 0 || n != 0 {
			d.fail("keep-alive with ttl %d, deadline %d, %d keys", l.TTL, l.Deadline, n)
		}
	case LeaseRevoke, LeaseExpire:
		if l.TTL != 0 || l.Deadline != 0 {
			d.fail("%s with ttl %d, deadline %d", l.Action, l.TTL, l.Deadline)
		}
	default:
		d.fail("unknown lease action %d", uint8(l.Action))
	}
	if n == 0 || d.err != nil {
		return nil
	}
	if cap(ops) >= n {
		ops = ops[:n]
		clear(ops)
	} else {
		ops = make([]Op, n)
	}
	for i := range ops {
		ops[i] = Op{Kind: KindDelete, Key: d.bytes()}
		if i > 0 && d.err == nil && bytes.Compare(ops[i-1].Key, ops[i].Key) >= 0 {
			d.fail("key %q not after %q", ops[i].Key, ops[i-1].Key)
		}
	}
	return ops
}
