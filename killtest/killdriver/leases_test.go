package killdriver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLeases kills lease renewers with the correct store: every lease,
// listed, kept and expired, is within the bounds of the deadlines it
// was acknowledged, across the kill and the restart.
func TestLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 renewers of the real binary, a few seconds each")
	}
	bin := kvBinary(t)
	r, err := Leases(context.Background(), LeasesOptions{Binary: bin, Runs: 4, TTL: time.Second, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := reportText(r)
	t.Log("\n" + out)
	if r.Runs != 4 || r.Bad() != 0 || !r.OK(false) {
		t.Errorf("%d runs, %d bad; want 4 runs and none bad", r.Runs, r.Bad())
	}
	if r.Killed == 0 || !strings.Contains(out, "kills landed while the renewer was still working") {
		t.Errorf("no renewer killed, or the report does not say so:\n%s", out)
	}
}

// TestLeasesGraceCaught: the lease-grace variant, whose open gives every
// lease a fresh TTL, is caught: a deadline past what was ever given.
func TestLeasesGraceCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs renewers of the real binary, a few seconds each")
	}
	bin := kvBinary(t)
	r, err := Leases(context.Background(), LeasesOptions{Binary: bin, Runs: 6, TTL: time.Second, Bug: "lease-grace",
		StopAfterBad: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := reportText(r)
	t.Log("\n" + out)
	if !r.OK(true) || len(r.Failures) == 0 {
		t.Fatalf("the lease-grace variant was not caught:\n%s", out)
	}
	if !strings.Contains(r.Failures[0].Outcome, "deadline moved past what was ever given (grace)") &&
		!strings.Contains(r.Failures[0].Outcome, "key outlived its lease's deadline") {
		t.Errorf("the first failure is not a deadline moved by the restart: %s", r.Failures[0].Outcome)
	}
}

// TestLeasesRenewerFailureCounted: a run whose renewer prints something
// else than renewals fails before its checks, and still counts as a run
// and a bad one, in a row of the table: a wrapper around the binary
// answers "lease keepalive" with a line no renewer prints.
func TestLeasesRenewerFailureCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binary")
	}
	bin := kvBinary(t)
	wrapper := filepath.Join(t.TempDir(), "kv-wrapper")
	script := fmt.Sprintf("#!/bin/sh\ncase \" $* \" in *\" keepalive \"*) echo 'not a renewal'; exit 0;; esac\nexec %q \"$@\"\n", bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Leases(context.Background(), LeasesOptions{Binary: wrapper, Runs: 3, TTL: 200 * time.Millisecond, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := reportText(r)
	t.Log("\n" + out)
	renewed := 0
	for _, f := range r.Failures {
		if f.Outcome == "renewer printed something else" {
			renewed++
		}
	}
	if renewed == 0 {
		t.Fatalf("no run's renewer was caught printing something else:\n%s", out)
	}
	if r.Runs != 3 || r.Bad() < renewed || r.OK(false) || !strings.Contains(out, "renewer printed something else") {
		t.Errorf("%d runs, %d bad, %d failures before the checks; want 3 runs, each of those failures bad and in the table:\n%s", r.Runs, r.Bad(), renewed, out)
	}
}
