package filelock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvstore/kv/filelock/lockstore"
)

// tmpGrace is the age under which a holder file's temporary name is left
// alone by Sweep: its holder may be between creating and locking it.
const tmpGrace = time.Minute

// Sweep removes the holders judged dead, of every lock: each removal is
// a transaction conditional on the revision judged, so that a sweep
// racing a takeover never deletes the new holder's key. Then it removes
// holder files that no process holds and no marker names. It returns the
// holders it removed.
func (l *Locker) Sweep(ctx context.Context) ([]Info, error) {
	b := l.b
	if s, ok := b.(lockstore.Sessioner); ok {
		sb, end, err := s.Session(ctx)
		if err != nil {
			return nil, err
		}
		defer end()
		b = sb
	}
	kvs, _, err := b.Range(ctx, KeyPrefix)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var removed []Info
	named := map[string]bool{}
	for _, e := range kvs {
		name, slot, ok := parseSlotKey(e.Key)
		if !ok {
			if w, ok := l.deadWaiter(e); ok {
				// A waiter that died queued: its key only costs the
				// waiters behind it a probe, but it goes too.
				b.Txn(ctx, lockstore.Txn{
					If:   []lockstore.Compare{lockstore.ModRevIs(e.Key, e.ModRev)},
					Then: []lockstore.Op{lockstore.Delete(e.Key)},
				})
				if l.seesHolderFile(&w) {
					l.removeHolderFile(w.HolderFile)
				}
			} else if m, err := decodeMarker(e.Value); err == nil {
				named[m.HolderFile] = true
			}
			continue
		}
		s := newSlotState(name, slot, e)
		s.Alive, s.Reason = l.judge(&s.Marker, now)
		if s.Alive {
			named[s.HolderFile] = true
			continue
		}
		res, err := b.Txn(ctx, lockstore.Txn{
			If:   []lockstore.Compare{lockstore.ModRevIs(e.Key, e.ModRev)},
			Then: []lockstore.Op{lockstore.Delete(e.Key)},
		})
		if err != nil {
			return removed, err
		}
		if res.Succeeded {
			removed = append(removed, s.Info)
		}
	}
	if kernelLocks && l.holderDir != "" {
		l.sweepFiles(named, now)
	}
	return removed, nil
}

func (l *Locker) sweepFiles(named map[string]bool, now time.Time) {
	ents, err := os.ReadDir(l.holderDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, holderSuffix):
			if !named[n] {
				l.removeHolderFile(n)
			}
		case strings.HasSuffix(n, holderSuffix+tmpSuffix):
			if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > tmpGrace {
				if f, ok := takeHolderFile(filepath.Join(l.holderDir, n)); ok {
					// Unlinked while we hold its lock: its creator died
					// before renaming it, or gave up.
					os.Remove(filepath.Join(l.holderDir, n))
					f.Close()
				}
			}
		}
	}
}

// deadWaiter reports whether e is the wait key of a waiter judged dead.
func (l *Locker) deadWaiter(e lockstore.KeyValue) (Marker, bool) {
	rest, ok := strings.CutPrefix(e.Key, KeyPrefix)
	if !ok {
		return Marker{}, false
	}
	name, _, ok := strings.Cut(rest, "/wait/")
	if !ok || CheckName(name) != nil {
		return Marker{}, false
	}
	m, err := decodeMarker(e.Value)
	if err != nil || l.waiterAlive(&m) {
		return m, false
	}
	return m, true
}
