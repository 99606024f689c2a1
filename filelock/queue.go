package filelock

import (
	"context"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
)

// The wait queue: an Acquire that finds every slot held puts a key of its
// own under KeyPrefix+NAME+"/wait/"; its create revision is its place.
// Only the first n live waiters (n slots) try to take a slot; each of the
// others watches the holder file of the waiter n places ahead and wakes
// when that one takes a slot (it marks its file), gives up (unlinks it)
// or dies (the kernel closes it). A release thus wakes one process, not
// every waiter, and waiters are served in their order of arrival. The
// queue is for fairness only: exclusion rests on the slot's compares,
// and a waiter ahead that leaves a free slot untaken for headGrace is
// passed.

// headGrace is how long a waiter lets the waiters ahead of it take a free
// slot before it takes it itself.
const headGrace = time.Second

// movedOn is the modification time a waiter gives its holder file when
// it takes a slot: the sign, to the waiter behind, that it may go.
var movedOn = time.Unix(1, 0)

func waitPrefix(name string) string { return KeyPrefix + name + "/wait/" }

func waitKey(name, nonce string) string { return waitPrefix(name) + nonce }

// queue is an Acquire's place in the wait queue.
type queue struct {
	key      string
	enqueued bool
	queued   bool      // it was enqueued once: a waiter may watch its file
	stuck    time.Time // when a free slot was first seen left to the waiters ahead
}

// enqueue puts the waiter's key.
func (l *Locker) enqueue(ctx context.Context, b lockstore.Backend, q *queue, m Marker) error {
	res, err := b.Txn(ctx, lockstore.Txn{
		If:   []lockstore.Compare{lockstore.Absent(q.key)},
		Then: []lockstore.Op{lockstore.PutLeased(q.key, m.encode(), m.Lease)},
	})
	if err != nil {
		return err
	}
	q.enqueued = res.Succeeded
	q.queued = q.queued || res.Succeeded
	return nil
}

// dequeueTimeout bounds the removal of the wait key of an Acquire that
// gave up; if it fails, the key stays until a waiter finds its holder
// file unlocked.
const dequeueTimeout = 5 * time.Second

func (l *Locker) dequeue(q *queue) {
	ctx, cancel := context.WithTimeout(context.Background(), dequeueTimeout)
	defer cancel()
	l.b.Txn(ctx, lockstore.Txn{Then: []lockstore.Op{lockstore.Delete(q.key)}})
	q.enqueued = false
}

// queueAhead returns the live waiters queued before q (all of them when
// q is not queued), and removes the dead ones it meets, each under a
// compare on the revision it judged.
func (l *Locker) queueAhead(ctx context.Context, b lockstore.Backend, st lockState, q *queue) []*slotState {
	var ahead []*slotState
	for _, w := range st.waiters {
		if w.Key == q.key {
			break
		}
		if l.waiterAlive(&w.Marker) {
			ahead = append(ahead, w)
			continue
		}
		// Its holder file goes with its key, and not without it (a look
		// that does not write leaves both).
		res, err := b.Txn(ctx, lockstore.Txn{
			If:   []lockstore.Compare{lockstore.ModRevIs(w.Key, w.ModRev)},
			Then: []lockstore.Op{lockstore.Delete(w.Key)},
		})
		if err == nil && res.Succeeded && l.seesHolderFile(&w.Marker) {
			l.removeHolderFile(w.HolderFile)
		}
	}
	return ahead
}

// waiterAlive judges a waiter by its lease (its key exists: alive), its
// holder file, else its pid; what none can tell is passed over (it
// costs fairness, not safety).
func (l *Locker) waiterAlive(m *Marker) bool {
	if m.Lease != 0 {
		return true
	}
	// As a holder is judged: its holder file wherever the kernel is the
	// same, whatever the hostname, and its pid only in its own pid
	// namespace.
	if path, _ := l.holderFileOf(m); path != "" {
		if v, _ := probeHolderFile(path); v != unknown {
			return v == alive
		}
	}
	if !l.sameKernel(m) {
		return false
	}
	v, _ := l.probeProcess(m)
	return v == alive
}
