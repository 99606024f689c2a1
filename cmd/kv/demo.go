package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/internal/variant"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

type demoOpts struct{ keep bool }

func newDemoCmd(g *globalOpts) *cobra.Command {
	o := &demoOpts{}
	c := &cobra.Command{
		Use:   "demo",
		Short: "Show the store's main job end to end on a temporary directory",
		Long: `demo loads the workload of the article "Recovery Code Must Survive a
Crash Too" (Mehdi Akiki): add c 1 ... add c 10, put k1 v1 ... put k5 v5,
del k3, add d 7, into a fresh temporary directory, recovers it
(replay and checkpoint), then crashes a recovery in the middle (right
after it renamed its snapshot into place) and recovers again, and does
the same with the article's double-apply bug variant, printing the files
and the map at each step. It ends with commands to try next.`,
		Example: `  go run ./cmd/kv demo
  kv demo --keep    # leave the directories for a look`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demo(cmd.OutOrStdout(), o.keep)
		},
	}
	c.Flags().BoolVar(&o.keep, "keep", false, "keep the temporary directories")
	return c
}

// loadArticle writes the article's workload into dir and closes the store,
// leaving one segment and no snapshot.
func loadArticle(dir string) error {
	s, err := kv.Open(dir, nil)
	if err != nil {
		return err
	}
	var ps []*kv.Pending
	for _, op := range opmodel.ArticleOps() {
		ps = append(ps, s.Submit(op))
	}
	for _, p := range ps {
		if _, _, err := p.Wait(); err != nil {
			s.Close()
			return err
		}
	}
	return s.Close()
}

func listing(dir string) string {
	names, err := vfs.OS.List(dir)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, n := range names {
		// The lock and the marker are there throughout: the story is in
		// the segments and the snapshot.
		if n != kv.LockName && n != recovery.MarkerName {
			out = append(out, n)
		}
	}
	return strings.Join(out, " ")
}

func mapLine(s *kv.Store) string {
	var parts []string
	for e := range s.Scan(nil, nil) {
		parts = append(parts, opmodel.Show(e.Key)+"="+opmodel.Show(e.Value))
	}
	return strings.Join(parts, " ")
}

var errDemoCrash = errors.New("demo: the process is killed here")

// crashedRecovery recovers dir through a file system that dies right after
// the snapshot's rename, as a SIGKILL there would, and returns the files
// the crash left.
func crashedRecovery(dir string, bug variant.Bug) error {
	dead := false
	in := &vfs.Inject{FS: vfs.OS, Rule: func(op vfs.Op) error {
		if dead {
			return errDemoCrash
		}
		if op.Kind == vfs.OpRename && path.Base(op.Path) == snapshot.TmpName {
			dead = true // let the rename through, then die
		}
		return nil
	}}
	s, err := kv.Open(dir, &kv.Options{FS: variant.Wrap(in, bug)})
	if err != nil {
		if dead && errors.Is(err, errDemoCrash) {
			return nil
		}
		return err
	}
	// The checkpoint that ends the recovery, as kv DIR dump writes it;
	// from the crash point on every file operation fails, as if the
	// process were gone.
	s.Checkpoint()
	s.Close()
	if !dead {
		return errors.New("demo: the recovery finished before the crash point")
	}
	return nil
}

func demo(w io.Writer, keep bool) error {
	root, err := os.MkdirTemp("", "kv-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(root)
	}
	say := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }

	dir := path.Join(root, "data")
	say("The workload and the bug come from the article \"Recovery Code Must Survive a Crash Too\"")
	say("(Mehdi Akiki, \"What survives a crash\", part 11): its store checkpoints at the end of every")
	say("recovery, and its double-apply bug replays segments a snapshot already covers.")
	say("== 1. load the article's 17 operations into %s", dir)
	say("   add c 1 ... add c 10, put k1 v1 ... put k5 v5, del k3, add d 7")
	if err := loadArticle(dir); err != nil {
		return err
	}
	say("   files: %s   (closing does not checkpoint)", listing(dir))

	say("== 2. kv %s dump: recovery replays the log and checkpoints", dir)
	s, err := kv.Open(dir, nil)
	if err != nil {
		return err
	}
	st := s.Stats()
	if err := s.Checkpoint(); err != nil {
		s.Close()
		return err
	}
	want := mapLine(s)
	s.Close()
	say("   replayed %d records in %v; files now: %s", st.RecoveryReplayed, st.RecoveryTime.Round(1000), listing(dir))
	say("   map: %s", want)

	for _, bug := range []variant.Bug{variant.None, variant.DoubleApply} {
		name := "the correct store"
		if bug != variant.None {
			name = "the --bug " + string(bug) + " variant (its snapshot says it covers segment 0)"
		}
		dir := path.Join(root, "crash-"+strings.TrimPrefix(string(bug)+"-", "-")+"data")
		say("== 3%s. %s: kill a recovery right after 'rename snapshot.tmp -> snapshot'", map[bool]string{true: "a", false: "b"}[bug == variant.None], name)
		if err := loadArticle(dir); err != nil {
			return err
		}
		if err := crashedRecovery(dir, bug); err != nil {
			return err
		}
		say("   killed; files left: %s", listing(dir))
		s, err := kv.Open(dir, &kv.Options{FS: variant.Wrap(vfs.OS, bug)})
		if err != nil {
			return err
		}
		got := mapLine(s)
		s.Close()
		say("   recovered again: %s", got)
		if got == want {
			say("   same map as a recovery without a crash")
		} else {
			say("   DIFFERENT map from a recovery without a crash (%s): every increment applied twice", want)
		}
	}
	if keep {
		say("directories kept under %s", root)
	}
	say("== what to try next (kv is this command: CGO_ENABLED=0 go install ./cmd/kv puts it on PATH)")
	say("   kv crashsim recovery                        every state a crash can leave, recovered and checked")
	say("   kv crashsim recovery --bug double-apply     the same checker catching the article's bug")
	say("   kv killtest recovery --runs 100             SIGKILL real recoveries, as the article did")
	say("   printf 'add c 1\\nput k v\\n' | kv data load   a store of your own; then kv data dump, kv data log")
	return nil
}
