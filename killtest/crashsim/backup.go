package crashsim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// backupPrefix names the backups the backup workload writes into the
// data directory, where recovery ignores them and the crash models see
// them: backup.1, backup.2, ..., each published as kv DIR backup FILE
// publishes one (written to NAME.tmp, synced, renamed, directory synced).
const backupPrefix = "backup."

// backupProgram is pipelinedProgram with online backups: every third
// wave, when no backup runs, it starts one on a goroutine of its own
// while the waves go on, so that writes, group commits and the
// background checkpoints that the small options start race it. Every
// other backup also runs a checkpoint itself, when Backup first writes
// to its file: from the view taken to the rename of its file, a
// checkpoint rotates the log, writes its snapshot and deletes the
// segments it covers, which the background checkpoints, few and quick
// at these sizes, only now and then do (TestBackupWorkloadRaces). A backup
// that returned promises its revision durable (a read): it was taken
// from what the store shows, which under Always is durable. After a
// failed write it waits for the running backup and reopens the store,
// as pipelinedProgram does.
func backupProgram(ops []kv.Op, seed uint64) Program {
	return func(fsys vfs.FS, dir string, opts kv.Options, rec *vfs.Recorder) error {
		r, err := openReopener(dir, opts)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(seed, 0xbac))
		var running chan struct{} // closed when the running backup ends
		backups := 0
		start := func(s *kv.Store) {
			backups++
			name := fmt.Sprintf("%s%d", backupPrefix, backups)
			done := make(chan struct{})
			running = done
			go func() {
				defer close(done)
				var rev kv.Revision
				checkpoint := backups%2 == 0
				err := vfs.Publish(fsys, dir, name, func(w io.Writer) error {
					var err error
					if checkpoint {
						w = &checkpointWriter{w: w, s: s}
					}
					rev, err = s.Backup(w)
					return err
				})
				// A backup that failed (a failed sync of its file, under
				// the fsync-failure model) promises nothing.
				if err == nil {
					rec.Read(uint64(rev))
				}
			}()
		}
		wait := func() {
			if running != nil {
				<-running
			}
		}
		err = inWaves(r, ops, rng, rec, waveHooks{
			before: func(wave int) {
				if wave%3 != 0 {
					return
				}
				select {
				case <-running:
					running = nil
				default:
				}
				if running == nil {
					start(r.s)
				}
			},
			failed: func() {
				wait()
				running = nil
			},
			done: wait,
		})
		wait() // when a reopen failed
		return err
	}
}

// checkpointWriter runs a checkpoint of s before the first write to w:
// inside a backup, after it took its view and while its file is open.
// The checkpoint's error is the store's: a failed one fails the writes
// that follow, which the program then handles.
type checkpointWriter struct {
	w    io.Writer
	s    *kv.Store
	done bool
}

func (c *checkpointWriter) Write(p []byte) (int, error) {
	if !c.done {
		c.done = true
		c.s.Checkpoint()
	}
	return c.w.Write(p)
}

// judgeBackups checks every backup a state holds (a published name, not
// a .tmp): it must decode, and hold the map after the records up to its
// revision, by the reference of the crashed program. nil when good.
func (c *checker) judgeBackups(s State) *Bad {
	root := c
	for root.outer != nil {
		root = root.outer
	}
	if root.ref == nil {
		return nil
	}
	for _, name := range s.Names() {
		if !strings.HasPrefix(name, backupPrefix) || strings.HasSuffix(name, ".tmp") {
			continue
		}
		var b strings.Builder
		d, err := kv.DecodeBackup(s[name], func(e kv.Entry) error {
			b.WriteString(opmodel.DumpLine(e.Key, e.Value))
			return nil
		})
		if err != nil {
			return &Bad{Reason: fmt.Sprintf("%s: %v", name, err)}
		}
		m := int(d.Revision) - int(root.rev0)
		if m < 0 || m > root.ref.hist.Records() {
			return &Bad{Reason: fmt.Sprintf("%s at revision %d: the program committed revisions %d to %d",
				name, d.Revision, root.rev0, int(root.rev0)+root.ref.hist.Records())}
		}
		if want := root.ref.hist.Dump(m); b.String() != want {
			return &Bad{Reason: fmt.Sprintf("%s at revision %d is not the map at its revision: %s", name, d.Revision,
				describe(want, b.String())), Diff: mapDiff(want, b.String())}
		}
	}
	return nil
}
