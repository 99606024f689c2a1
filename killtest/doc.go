// Package killtest is the home of the store's two crash checkers, the
// proof that the store keeps its promises at every system call, as the
// project's design card names it. It holds no code of its own; each
// checker is a package below it, and the kv command runs both:
//
//   - crashsim (kv crashsim WORKLOAD --model M): the crash-state
//     simulator. It runs a workload on a recording file system, builds
//     every state a process crash, a power loss, a pessimistic power loss
//     or a failed fsync could leave after each event, recovers each (and
//     crashes that recovery again), and checks that no acknowledged write
//     is lost, none is applied twice, and no state is called corrupt.
//   - killdriver (kv killtest recovery|writes|leases): the kill driver.
//     It runs the real kv binary as processes on the real kernel, SIGKILLs
//     them mid-recovery and mid-write at random moments, and checks what
//     the next recovery finds against a model of the acknowledged
//     operations.
//
// Each checker has bug variants (--bug NAME, internal/variant) and the
// mutants under mutants/ that it must catch, so that a checker that
// cannot fail is seen.
package killtest
