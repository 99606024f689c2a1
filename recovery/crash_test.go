package recovery_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
)

// outcome is the recovery of one crash state.
type outcome struct {
	state string // how the state came about
	got   map[string]string
	err   error
}

// crashRecoveries runs Recover on a copy of fsys, crashed after each
// file operation in turn, and recovers each state a crash leaves: the
// current state (a process crash) and the durable one (a power loss that
// keeps nothing unsynced). With depth > 1 the recovery of each state is
// itself crashed the same way. It returns the outcome of the final
// recovery of every state.
func crashRecoveries(tb testing.TB, fsys *vfs.MemFS, dir string, opts recovery.Options, bug variant.Bug, depth int, prefix string) []outcome {
	tb.Helper()
	var outs []outcome
	for budget := 0; ; budget++ {
		base := fsys.Clone()
		cfs := &crashFS{FS: base, budget: budget}
		res, err := recovery.Recover(variant.Wrap(cfs, bug), dir, opts)
		finished := err == nil
		if finished {
			res.Writer.Close()
		} else if !errors.Is(err, errCrashed) {
			outs = append(outs, outcome{state: fmt.Sprintf("%scrash after op %d: first recovery", prefix, budget), err: err})
			return outs
		}
		states := []struct {
			name string
			fs   *vfs.MemFS
		}{
			{"process", base.Clone()},
			{"power", base.CrashClone()},
		}
		for _, st := range states {
			name := fmt.Sprintf("%s%s crash after op %d", prefix, st.name, budget)
			if depth > 1 {
				outs = append(outs, crashRecoveries(tb, st.fs, dir, opts, bug, depth-1, name+", then ")...)
				continue
			}
			o := outcome{state: name}
			res, err := recovery.Recover(variant.Wrap(st.fs, bug), dir, opts)
			if err != nil {
				o.err = err
			} else {
				o.got = dump(res.Map)
				res.Writer.Close()
				// Recovering again changes nothing.
				res2, err := recovery.Recover(variant.Wrap(st.fs, bug), dir, opts)
				if err != nil {
					o.err = fmt.Errorf("second recovery: %w", err)
				} else {
					if d := cmp.Diff(o.got, dump(res2.Map)); d != "" {
						o.err = fmt.Errorf("second recovery differs (-first +second):\n%s", d)
					}
					res2.Writer.Close()
				}
			}
			outs = append(outs, o)
		}
		if finished {
			return outs
		}
	}
}

func checkOutcomes(t *testing.T, outs []outcome, want map[string]string) {
	t.Helper()
	bad := 0
	for _, o := range outs {
		if o.err != nil {
			bad++
			if bad <= 3 {
				t.Errorf("%s: %v", o.state, o.err)
			}
			continue
		}
		if d := cmp.Diff(want, o.got); d != "" {
			bad++
			if bad <= 3 {
				t.Errorf("%s: map (-want +got):\n%s", o.state, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d crash states bad", bad, len(outs))
	}
	if len(outs) < 10 {
		t.Errorf("only %d crash states: the crash loop did not run", len(outs))
	}
}

func TestRecoveryCrashIdempotent(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	outs := crashRecoveries(t, fsys, dir, recovery.Options{}, variant.None, 2, "")
	checkOutcomes(t, outs, articleWant)
	t.Logf("%d crash states checked", len(outs))
}

// TestDoubleApplyBugIsCaught shows that the crash loop above can fail: the
// article's bug variant applies the increments twice after a crash
// between the snapshot's rename and the deletion of the segment.
func TestDoubleApplyBugIsCaught(t *testing.T) {
	fsys, dir := newDir(t)
	writeLog(t, fsys, dir, 1, 1, articleOps())
	outs := crashRecoveries(t, fsys, dir, recovery.Options{}, variant.DoubleApply, 1, "")
	doubled := map[string]string{"c": "110", "d": "14", "k1": "v1", "k2": "v2", "k4": "v4", "k5": "v5"}
	n := 0
	for _, o := range outs {
		if o.err == nil && cmp.Equal(doubled, o.got) {
			n++
			t.Logf("%s: c=110 instead of 55, d=14 instead of 7", o.state)
		}
	}
	if n == 0 {
		t.Fatalf("no crash state showed the double application; %d states", len(outs))
	}
}
