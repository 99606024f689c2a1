package crashsim

import (
	"strings"

	"github.com/kvstore/kv/snapshot/image"
	"testing"
)

// TestLeaseWorkloadCovers: the generated leases workload does what its
// doc says it does: expiries by the store's timer (a wait that ends a
// lease), at a write right at a deadline, and at the reopen after a
// restart past one; keys deleted by expiries and revokes; operations on
// ended leases refused; and, in its trace, checkpoints that write a
// snapshot while leases are live (format version 2, or an image that
// holds them).
func TestLeaseWorkloadCovers(t *testing.T) {
	steps := leaseSteps(50, 1)
	m := newLeaseModel(0)
	var timer, atWrite, atRestart, keysEnded, refused int
	for _, s := range steps {
		records, bound := m.records, len(m.bound)
		commits, _ := m.step(s)
		expired := m.records - records
		if commits && s.Op != "wait" {
			expired--
		}
		switch {
		case !commits:
			refused++
		case expired > 0 && s.Op == "wait":
			timer++
		case expired > 0 && s.Restart:
			atRestart++
		case expired > 0:
			atWrite++
		}
		if len(m.bound) < bound && (expired > 0 || s.Op == "revoke") {
			keysEnded++
		}
	}
	t.Logf("expiries: %d by the timer, %d at a write, %d at a reopen; %d steps ended bound keys; %d refused",
		timer, atWrite, atRestart, keysEnded, refused)
	if timer == 0 || atWrite == 0 || atRestart == 0 || keysEnded == 0 || refused == 0 {
		t.Error("the workload misses one of the cases it is for")
	}

	w := Workload{Dir: dataDir, Initial: State{}, Options: leaseOptions, Program: leaseProgram(steps), Leases: steps}
	c := &checker{w: w, opts: w.Options, cache: map[uint64]outcome{}, report: &Report{}}
	events, err := c.trace(nil)
	if err != nil {
		t.Fatal(err)
	}
	m2 := newModel(dataDir, State{})
	v2 := 0
	for _, e := range events {
		m2.apply(e)
		if strings.HasPrefix(e.String(), "rename snapshot.tmp -> snapshot") {
			snap := m2.processState()["snapshot"]
			// Version 2, or an image whose footer counts leases.
			if len(snap) > 8 && snap[6] == 2 || len(snap) > 72 && snap[6] == image.Version && snap[len(snap)-72+24] > 0 {
				v2++
			}
		}
	}
	if v2 == 0 {
		t.Error("no checkpoint of the trace wrote a snapshot with leases")
	}
}
