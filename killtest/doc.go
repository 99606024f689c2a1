// Package killtest holds the store's crash checkers: the crash-state
// simulator (Check) and the kill driver (KillRecovery, KillWrites). Both
// come from the article "Recovery Code Must Survive a Crash Too" (Mehdi
// Akiki), called the article in this package: its store, its 17-operation
// workload (ArticleOps), its double-apply bug and the shape of its
// reports.
//
// # What it checks
//
// Check runs a workload's program on a recording file system (vfs.Recorder)
// and, after each event, builds every state a crash model allows (Model:
// process, machine, pessimistic, fsync-failure). It recovers each state
// and checks that
//
//   - every acknowledged operation, and every revision a read saw, is in
//     the recovered map;
//   - the map is the map after some prefix of the issued operations, so
//     that no operation is applied twice (the workloads use add);
//   - no crash state is refused as corruption;
//   - the store's outcome of every operation (a fence refused, a
//     compare's branch) is the reference model's.
//
// Then it recovers every distinct state again, traced, and crashes that
// recovery at every point under the process, machine and pessimistic
// models: until the recovery shows its map, any map the first program's
// promises allow; after, exactly that map.
//
// The kill driver runs the real kv binary on the real kernel and kills it
// with SIGKILL: a recovery (kv DIR dump), compared with a recovery without
// a crash, or a writer (kv DIR load --ack), whose map must hold every
// acknowledged operation once.
//
// # Crash contract
//
// None of its own: it crashes the store, on a recording file system
// (Check) or in a child process (the kill driver), and never touches a
// directory it did not create. Each checker is shown to fail on the
// store's bug variants (recovery.Bug).
//
// # Usage
//
//	ws, err := killtest.Workloads(0, 1)
//	rep, err := killtest.Check(ws[0], killtest.Config{Models: killtest.Models()})
//	if !rep.Ok() { ... }
package killtest
