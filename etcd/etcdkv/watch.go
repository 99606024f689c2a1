package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// Resuming a watch whose member lost its leader waits between resumeMin
// and resumeMax, doubling, while no leader answers.
const (
	resumeMin = 50 * time.Millisecond
	resumeMax = time.Second
)

// prevTries bounds how often a watch starts again at a revision whose
// previous values etcd left out (see watchState.handle) before it gives
// up with an error.
const prevTries = 3

// Watch yields the changes under prefix from revision from on, with
// kvapi.KV's contract (kv.Store.Watch's), as an etcd watch of the
// prefix (WithPrefix, WithRev, and WithPrevKV when o.Prev):
//
//   - It asks etcd for the revision before from, and drops that
//     revision's events: etcd refuses a watch from a revision below its
//     compaction revision C but serves one from C itself, whose delete
//     events older etcd releases dropped (etcd-io/etcd#18089). So a watch
//     from C or older ends with a *kv.CompactedError whose Oldest is C+1,
//     on every release, and so does one that falls behind a compaction
//     (etcd's CompactRevision in the response).
//   - etcd's client resumes a broken stream (a member killed, a lost
//     connection) from the revision after the last it delivered. The
//     watch requires a leader (clientv3.WithRequireLeader), so that a
//     member cut off from the majority ends it instead of staying
//     silent; it then starts again from the revision after the last it
//     yielded, on whichever member answers, waiting up to a second
//     between tries while no leader answers, until ctx ends. Events at
//     or before the last yielded are never yielded again. A member that
//     is paused (SIGSTOP, a stalled machine) holds the watch until it
//     resumes or its connection breaks: set the client's
//     DialKeepAliveTime to bound that.
//   - etcd fills a previous value by reading the revision before the
//     event; when a compaction overtook the watch in between, it sends
//     the event without it. The watch then starts again from that
//     revision, which either yields it with its previous value or ends
//     with a *kv.CompactedError.
//
// A from of 0 is the revision after the one a linearizable read sees
// when the watch starts. A from past math.MaxInt64 is kv.ErrInvalid.
func (k *KV) Watch(ctx context.Context, prefix []byte, from kv.Revision, o *kvapi.WatchOptions) iter.Seq2[kv.Event, error] {
	prefix = append([]byte(nil), prefix...)
	return func(yield func(kv.Event, error) bool) {
		if err := k.check(ctx); err != nil {
			yield(kv.Event{}, err)
			return
		}
		if from > math.MaxInt64 {
			yield(kv.Event{}, fmt.Errorf("%w: watch from revision %d", kv.ErrInvalid, from))
			return
		}
		wctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(k.done, func() { cancel(kv.ErrClosed) })
		defer stop()
		next := int64(from)
		if next == 0 {
			// The next revision to commit: after the cluster's
			// revision as a linearizable read sees it. An etcd watch
			// from "now" starts after what its member has applied, which
			// a lagging follower has not: it would yield changes
			// acknowledged before the call.
			resp, err := k.c.Get(wctx, "\x00", clientv3.WithCountOnly())
			if err != nil {
				if e := ctx.Err(); e != nil {
					err = e
				} else if wctx.Err() != nil {
					err = kv.ErrClosed
				} else {
					err = mapErr(err, false)
				}
				yield(kv.Event{}, err)
				return
			}
			next = resp.Header.Revision + 1
		}
		w := &watchState{next: next, prev: o != nil && o.Prev}
		wait := resumeMin
		for {
			r := k.watchOnce(wctx, prefix, w, yield)
			if r.stopped {
				return // the loop's body broke
			}
			err := r.err
			if e := ctx.Err(); e != nil {
				err = e
			} else if wctx.Err() != nil {
				err = kv.ErrClosed
			}
			if err != nil {
				yield(kv.Event{}, err)
				return
			}
			k.resumes.Add(1)
			if r.yielded > 0 {
				wait = resumeMin
			}
			select {
			case <-wctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, resumeMax)
		}
	}
}

// onceResult is how one etcd watch ended: the loop's body broke
// (stopped), or with the error that ends the watch, or, when neither,
// so that the watch starts again from watchState.next.
type onceResult struct {
	yielded int
	stopped bool
	err     error
}

// watchOnce runs one etcd watch from w.next and yields its events.
func (k *KV) watchOnce(ctx context.Context, prefix []byte, w *watchState, yield func(kv.Event, error) bool) onceResult {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// An empty key with WithPrefix watches every key.
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(max(w.next-1, 1))}
	if w.prev {
		opts = append(opts, clientv3.WithPrevKV())
	}
	var r onceResult
	for resp := range k.c.Watch(sctx, string(prefix), opts...) {
		evs, err, resume := w.handle(&resp)
		for _, ev := range evs {
			if !yield(ev, nil) {
				r.stopped = true
				return r
			}
			r.yielded++
		}
		if err != nil || resume {
			r.err = err
			return r
		}
	}
	// The channel closed with no response saying why: ctx ended (the
	// caller sees to it), or the client was closed.
	if k.c.Ctx().Err() != nil {
		r.err = fmt.Errorf("%w: etcd client closed", kv.ErrClosed)
	}
	return r
}

// watchState is a watch's place across the etcd watches it runs.
type watchState struct {
	// next is the revision the watch needs next: its events are yielded,
	// those of any revision before it are not (the revision before from,
	// asked for to learn whether from is compacted; revisions yielded
	// before a resume).
	next      int64
	prev      bool
	prevTries int // starts again at next for lack of a previous value
}

// handle turns one response of an etcd watch into the events to yield
// and the error that ends the watch, or resume true when the watch must
// start again from w.next. It moves w.next past the revisions it
// returns the events of, whole: a revision whose events it cannot all
// give (a previous value missing) is left for the watch from w.next.
func (w *watchState) handle(resp *clientv3.WatchResponse) ([]kv.Event, error, bool) {
	if resp.Created {
		return nil, nil, false
	}
	if resp.CompactRevision != 0 {
		return nil, &kv.CompactedError{Requested: kv.Revision(w.next), Oldest: kv.Revision(resp.CompactRevision + 1)}, false
	}
	if err := resp.Err(); err != nil {
		if errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrGRPCNoLeader) {
			return nil, nil, true
		}
		return nil, fmt.Errorf("etcdkv: watch: %w", err), false
	}
	var out []kv.Event
	evs := resp.Events
	for len(evs) > 0 {
		rev := evs[0].Kv.ModRevision
		i := 1
		for i < len(evs) && evs[i].Kv.ModRevision == rev {
			i++
		}
		group := evs[:i]
		evs = evs[i:]
		if rev < w.next {
			continue
		}
		n := len(out)
		for _, ev := range group {
			e, ok := event(ev, w.prev)
			if !ok {
				w.prevTries++
				if w.prevTries > prevTries {
					return out[:n], fmt.Errorf("etcdkv: watch: etcd sent %q at revision %d without its previous value, %d times", ev.Kv.Key, rev, prevTries), false
				}
				w.next = rev
				return out[:n], nil, true
			}
			out = append(out, e)
		}
		w.next, w.prevTries = rev+1, 0
	}
	return out, nil, false
}

// event converts an etcd event; ok is false when it lacks the previous
// value asked for: a change to a key that existed (not a creation) came
// without it.
func event(ev *clientv3.Event, prev bool) (kv.Event, bool) {
	var out kv.Event
	switch ev.Type {
	case mvccpb.DELETE:
		out = kv.Event{Type: kv.EventDelete, Entry: kv.Entry{Key: ev.Kv.Key, ModRev: kv.Revision(ev.Kv.ModRevision)}}
	default:
		out = kv.Event{Type: kv.EventPut, Entry: entry(ev.Kv)}
	}
	if !prev {
		return out, true
	}
	if ev.PrevKv != nil {
		p := entry(ev.PrevKv)
		out.Prev = &p
		return out, true
	}
	return out, ev.IsCreate()
}
