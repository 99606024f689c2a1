package crashsim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// keepWritingProgram issues every operation one at a time and goes on
// after a failure, acknowledging only the writes that returned nil: after
// a failed fdatasync, later syncs may "succeed", and nothing may be
// acknowledged on the strength of them.
func keepWritingProgram(ops []kv.Op) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		s, err := kv.Open(dir, &opts)
		if err != nil {
			return err
		}
		var first error
		for i, op := range ops {
			rec.Issue(i + 1)
			if _, _, err := s.Submit(op).Wait(); err != nil {
				if first == nil {
					first = fmt.Errorf("operation %d: %w", i+1, err)
				}
				continue
			}
			rec.Ack(i + 1)
		}
		if err := s.Close(); first == nil {
			first = err
		}
		return first
	}
}

// fsyncFailureBugs are the variants TestSimFsyncFailure must catch.
var fsyncFailureBugs = []variant.Bug{variant.RetrySync}

// TestSimFsyncFailure runs the fsync-failure model on the writes workload
// (the k-th fdatasync fails, for every k, and its unsynced writes are lost
// for good while later syncs succeed), with the workload's program and with
// one that keeps writing after the failure. The correct store has no bad
// state; the retry-fsync variant, which retries the failed fdatasync and
// acknowledges when the retry returns nil, loses acknowledged writes.
func TestSimFsyncFailure(t *testing.T) {
	ops := randomOps(40, 1)
	workloads := []Workload{
		{Name: "writes", Dir: dataDir, Initial: State{}, Options: smallOptions, Program: writesProgram(ops), Ops: ops},
		{Name: "keep-writing", Dir: dataDir, Initial: State{}, Options: smallOptions, Program: keepWritingProgram(ops), Ops: ops},
	}
	for _, w := range workloads {
		for _, bug := range append([]variant.Bug{variant.None}, fsyncFailureBugs...) {
			if bug != variant.None && w.Name != "writes" {
				continue
			}
			t.Run(w.Name+"/"+string(bug), func(t *testing.T) {
				rep, err := Check(w, Config{Models: []Model{FsyncFailure}, Bug: bug, Seed: 1, NoNested: true})
				if err != nil {
					t.Fatal(err)
				}
				out := report(t, rep)
				t.Logf("\n%s", out)
				mr := rep.Models[0]
				if rep.Counts["sync"] < 20 {
					t.Fatalf("%d syncs in the trace: too few failures to try", rep.Counts["sync"])
				}
				if mr.Model != FsyncFailure || mr.States < rep.Counts["sync"] {
					t.Fatalf("%d fsync-failure states checked, want at least one per sync", mr.States)
				}
				if bug == variant.None {
					if !rep.Ok() {
						t.Errorf("bad fsync-failure states for the correct store:\n%s", out)
					}
					return
				}
				if mr.Bad == 0 || mr.First == nil {
					t.Fatalf("the %s variant was not caught by the fsync-failure model:\n%s", bug, out)
				}
				// The retried sync "succeeds" without the lost pages; what
				// is written after it (a write's record, the mark after its
				// sync) claims them durable: after a power loss the write is
				// gone, or the log refuses to open.
				if !strings.Contains(mr.First.Reason, "with sync") ||
					!strings.Contains(mr.First.Reason, "acknowledged operation lost") && !strings.Contains(mr.First.Reason, "recovery failed") {
					t.Errorf("first bad state: %s\nwant an acknowledged operation lost, or a refusal, after a failed sync", mr.First)
				}
			})
		}
	}
}
