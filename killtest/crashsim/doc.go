// Package crashsim is the crash-state simulator, one of the store's crash
// checkers (the other is the kill driver, killtest/killdriver). It follows the
// article "Recovery Code Must Survive a Crash Too" (Mehdi Akiki), called
// the article in this package: its store, its 17-operation workload, its
// double-apply bug and the shape of its reports.
//
// # What it checks
//
// Check runs a workload's program on a recording file system (vfs.Recorder)
// and, after each event, builds every state a crash model allows (Model:
// process, machine, pessimistic, fsync-failure; sim.go). It recovers each
// state and checks that
//
//   - every acknowledged operation, and every revision a read saw, is in
//     the recovered map;
//   - the map is the map after some prefix of the issued operations, so
//     that no operation is applied twice (the workloads use add);
//   - no crash state is refused as corruption;
//   - the store's outcome of every operation (a fence refused, a
//     compare's branch) is the reference model's.
//
// The reference model (check.go) judges each operation's fence and
// compares itself and keeps the map after each record in an
// opmodel.History, apart from the store's log, committer and recovery.
//
// Then it recovers every distinct state again, traced, and crashes that
// recovery at every point under the process, machine and pessimistic
// models: until the recovery shows its map, any map the first program's
// promises allow; after, exactly that map.
//
// Workloads (workloads.go) returns the named workloads of kv crashsim,
// and RandomWorkload and Shrink the generated ones.
//
// # Crash contract
//
// None of its own: every program and every recovery runs on an in-memory
// file system (vfs.NewMem), never on a disk. Each bug variant of the store
// (internal/variant) is shown to be caught, in the model and at the crash
// point where it should be (TestSimBugsCaught, TestSimFsyncFailure).
//
// # Usage
//
//	ws, err := crashsim.Workloads(150, 1)
//	rep, err := crashsim.Check(ws[0], crashsim.Config{Models: crashsim.Models()})
//	if !rep.Ok() {
//		rep.Print(os.Stdout)
//	}
package crashsim
