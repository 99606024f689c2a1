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
	if kernelLocks {
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
					os.Remove(filepath.Join(l.holderDir, n))
					f.Close()
				}
			}
		}
	}
}
