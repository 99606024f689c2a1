package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/recovery"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type pflagFlag = pflag.Flag

// usageError is a mistake in the command line: exitUsage and a hint.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run executes the command line args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "kv: internal error: %v (please report it)\n", r)
			code = exitInternal
		}
	}()
	if len(args) == 0 {
		// As git does: a few lines on stderr and a usage error, not the
		// whole help on stdout with success.
		fmt.Fprint(stderr, shortUsage)
		return exitUsage
	}
	if wantsEtcd(args) {
		return runEtcd(args, stdin, stdout, stderr)
	}
	root, g := newRootOpts(stdin, stdout, stderr)
	root.SetArgs(rewriteArgs(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	// The root command runs nothing: an error that ends there is cobra's
	// lookup of the command (an unknown one). Its flag errors and every
	// command's argument checks are usageErrors already (newRoot).
	var ue usageError
	var kue kvcli.UsageError
	if errors.As(err, &ue) || errors.As(err, &kue) || cmd == root {
		fmt.Fprintf(stderr, "kv: %s\nRun 'kv --help' for usage.\n", trimKV(err))
		return exitUsage
	}
	var ex exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintf(stderr, "kv: %s\n", ex.msg)
		}
		return ex.code
	}
	var kex kvcli.ExitError
	if errors.As(err, &kex) {
		if kex.Msg != "" {
			fmt.Fprintf(stderr, "kv: %s\n", kex.Msg)
		}
		return kex.Code
	}
	if errors.Is(err, recovery.ErrBusy) {
		// A reader that gave up on a directory a live writer kept
		// changing: no judgment of the directory, so not "corrupt" and
		// not exit 1, but EX_TEMPFAIL, as a held lock: try again later.
		fmt.Fprintf(stderr, "kv: %s\n", trimKV(err))
		return exitTempFail
	}
	msg := describe(err)
	if *g.openedWriter && recovery.IsCorrupt(err) {
		// Found after a writer's open, which may have sealed or rotated
		// the log: not "nothing was changed".
		msg = strings.Replace(msg, hintNothingChanged, hintAfterOpen, 1)
	}
	fmt.Fprintf(stderr, "kv: %s\n", msg)
	return exitFailed
}

// The hints describe adds to damage: found by an open (which changed
// nothing), or by a read after a writer's open (which may have sealed or
// rotated the log, but wrote nothing of the command's own).
const (
	hintNothingChanged = " (nothing was changed; 'kv DIR check' lists the damage, 'kv DIR dump --salvage' prints what can still be read, 'kv DIR repair --salvage' keeps it)"
	hintAfterOpen      = " (found after the store was opened, in a block of the snapshot's image that an open does not read: the command's own change was not made, though the open may have sealed the log and started the next segment; 'kv DIR check' lists the damage, 'kv DIR dump --salvage' prints what can still be read, 'kv DIR repair --salvage' keeps it)"
)

// keyError words a failed operation on key: the key quoted, so that an
// empty key shows as "".
func keyError(key []byte, err error) error { return kvcli.KeyError(key, err) }

// exitError ends the command with a code, after it printed its own report.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// describe turns an error into the one line a user reads, without the
// "kv: " of the store's errors (run prints one): for damage, the file
// and offset first.
func describe(err error) string {
	var ce *wal.CorruptError
	if errors.As(err, &ce) {
		loc := ce.File
		if ce.Offset >= 0 {
			loc = fmt.Sprintf("%s offset %d", ce.File, ce.Offset)
		}
		hint := ""
		switch {
		case recovery.IsCorrupt(err):
			hint = hintNothingChanged
		case errors.Is(err, wal.ErrVersion):
			// Under checksums that hold (recovery.Report.LogFormatErr).
			hint = " (not damage: a build that reads that version wrote it; open the directory with that build, as repair will not; nothing was changed)"
		}
		return fmt.Sprintf("%s: %v: %s%s", loc, trimPrefix(ce.Err), ce.Reason, hint)
	}
	var pe *fs.PathError
	if errors.Is(err, fs.ErrPermission) && errors.As(err, &pe) {
		return permissionMessage(pe)
	}
	return trimKV(err)
}

// permissionMessage names the file that refused: the file itself when
// it exists (for this user), else its directory, which does not let this
// user create or reach it.
func permissionMessage(pe *fs.PathError) string {
	if _, err := vfs.OS.Stat(pe.Path); err == nil {
		return fmt.Sprintf("%s: permission denied (%s)", pe.Path, pe.Op)
	}
	dir := filepath.Dir(pe.Path)
	if dir == "." {
		dir = "the current directory"
	}
	return fmt.Sprintf("%s: permission denied: this user cannot %s %s in it", dir, pe.Op, filepath.Base(pe.Path))
}

func trimPrefix(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// trimKV is err's text without the prefixes "kv: " that would repeat
// the one run prints.
func trimKV(err error) string { return kvcli.Trim(err) }

// shortUsage is what kv without arguments prints on stderr: the usage
// line, the commands most used, and where the rest is.
const shortUsage = `usage: kv DIR COMMAND [ARGS]     (or: kv COMMAND DIR [ARGS])

  kv DIR put --create KEY VALUE    set a key, making DIR if it is missing
  kv DIR get KEY                   print a key's value
  kv DIR load < FILE               apply put/del/add lines from stdin
  kv DIR dump                      recover and print every key
  kv DIR check                     verify without changing anything
  kv demo                          the whole story on a temporary directory

kv --help for more.
`

const rootLong = `kv works on a data directory of the kv store: write-ahead log segments
(log.000001, ...) and a snapshot. Every command that opens the directory
runs recovery first: it loads the snapshot, replays the log segments the
snapshot does not cover, and checkpoints if it replayed anything.

The directory comes before the command, as in the article: "kv data dump";
"kv dump data" is the same.

Creating a store: only load creates a missing data directory by itself
(it is how a store is made from a file or from another store's dump),
and restore, from a backup; put, add and lock create one only with
--create; every other command refuses a directory that does not exist.

Locks: one process at a time writes a store. Commands that write (put,
del, add, load, checkpoint, repair, lease grant and revoke, locks sweep)
need the writer's lock: when another process holds it they wait for it,
up to 10 s by default or --wait D, then exit 75; --wait 0 exits 75 at
once. Read commands (get,
scan, dump, log, check, stat, locks, lease list, watch, backup, verify)
never wait for the lock and never fail because of it: beside a live
writer they read what it has made durable, without its lock. Without a
writer they show every write a crashed or killed writer acknowledged,
making its last records durable with an fdatasync, which changes no
byte. Only dump (without --read-only) writes: it recovers as a writer's
open does, then checkpoints, as the article's does. The others change
nothing in the directory.

On an etcd cluster: "kv --etcd ENDPOINTS VERB ..." runs get, put, del,
add, scan, dump, watch, lock and locks on the cluster, with the same
output and exit codes; "kv DIR export --to-etcd ENDPOINTS" copies a store
to it. They run kv-etcd, installed apart ("kv --etcd ENDPOINTS --help").

Output: --json prints one JSON object per line; see "kv help json" for
the schema. Errors are one line on stderr starting with "kv: ".

Exit status:
  0       success
  1       failure
  2       a mistake in the command line
  3       a bug in kv
  4       a fenced write refused, nothing written
  5       a lock taken over while its command ran
  6       dump --read-only left out records it could not vouch durable
  7       get: no such key
  8       verify: the store and the backup differ
  75      the store is busy (locked by another writer, lock --wait gave up,
          or a reader found the store changing under it): try again
  126     lock: the command could not be run
  127     lock: the command was not found
  128+N   interrupted by signal N (130 for Ctrl-C)

"The article" in the help of demo, crashsim and killtest is "Recovery
Code Must Survive a Crash Too" (Mehdi Akiki), whose store, 17-operation
workload, double-apply bug and crash checkers kv follows.`

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root, _ := newRootOpts(stdin, stdout, stderr)
	return root
}

// newRootOpts is newRoot, with the options its commands share.
func newRootOpts(stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, *globalOpts) {
	g := &globalOpts{stderr: stderr, openedWriter: new(bool)}
	root := &cobra.Command{
		Use:   "kv DIR COMMAND [ARGS]",
		Short: "An embedded, crash-safe key-value store: recover, inspect, verify and repair a data directory",
		Long:  rootLong,
		Example: `  kv demo                       # the whole story on a temporary directory
  kv data load < ops.txt        # put/del/add lines from stdin; creates data/
  kv data put --create k1 v1    # one write, creating data/ if it is missing
  kv data get k1
  kv data dump                  # recover and print every key
  kv old dump | kv new load     # copy a store
  kv data check                 # verify without changing anything`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
		// "kv <TAB>": the commands (cobra's), and the directories, for
		// the spelling "kv DIR VERB".
		ValidArgsFunction: completeFirst,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.SetUsageTemplate(usageTemplate)
	root.SetVersionTemplate("kv version {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.bug, "bug", "", "switch on a deliberate bug variant, for the crash tests")
	pf.MarkHidden("bug")
	root.AddCommand(
		newDumpCmd(g), newGetCmd(g), newPutCmd(g), newDelCmd(g), newAddCmd(g), newScanCmd(g),
		newLoadCmd(g), newCheckCmd(g), newLogCmd(g), newStatCmd(g), newCheckpointCmd(g),
		newRepairCmd(g), newDemoCmd(g), newCrashsimCmd(g),
		newKilltestCmd(g), newLockCmd(g), newLocksCmd(g), newWatchCmd(g), newLeaseCmd(g),
		newBackupCmd(g), newRestoreCmd(g), newVerifyCmd(g), newJSONHelp(),
	)
	// Cobra adds its completion command when it executes; added now, its
	// argument checks become usage errors with everyone else's.
	root.InitDefaultCompletionCmd()
	completionExamples(root)
	usageArgs(root)
	return root, g
}

// completionExamples gives cobra's completion command and its
// subcommands an example each, as every command of kv has.
func completionExamples(root *cobra.Command) {
	c, _, err := root.Find([]string{"completion"})
	if err != nil || c == root {
		return
	}
	c.Example = `  source <(kv completion bash)                 # bash, this shell (needs the bash-completion package)
  kv completion zsh > "${fpath[1]}/_kv"        # zsh, every new shell`
	for _, sub := range c.Commands() {
		switch sub.Name() {
		case "bash":
			sub.Example = `  source <(kv completion bash)
  kv completion bash > /etc/bash_completion.d/kv`
		case "zsh":
			sub.Example = `  source <(kv completion zsh)
  kv completion zsh > "${fpath[1]}/_kv"`
		case "fish":
			sub.Example = `  kv completion fish | source
  kv completion fish > ~/.config/fish/completions/kv.fish`
		case "powershell":
			sub.Example = `  kv completion powershell | Out-String | Invoke-Expression`
		}
	}
}

// usageTemplate is cobra's, with the usage line in the article's order,
// "kv DIR VERB ARGS", first (useLine).
const usageTemplate = `Usage:
  {{useLine .}}{{if .HasAvailableSubCommands}}{{if .HasParent}}
  {{.CommandPath}} [command]{{end}}{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func init() { cobra.AddTemplateFunc("useLine", useLine) }

// useLine is c's usage line: "kv DIR VERB ARGS [flags]" for a command
// whose first argument is the data directory, with the other spelling
// after it; cobra's own line otherwise.
func useLine(c *cobra.Command) string {
	if !c.HasParent() {
		return c.Use
	}
	if rest, ok := strings.CutPrefix(c.Use, c.Name()+" DIR"); ok && c.Parent() == c.Root() {
		flags := ""
		if c.HasAvailableFlags() {
			flags = " [flags]"
		}
		return fmt.Sprintf("kv DIR %s%s%s\n  (or: kv %s DIR%s%s)", c.Name(), rest, flags, c.Name(), rest, flags)
	}
	return c.UseLine()
}

// usageArgs makes the argument check of c and of every command below it
// return a usageError (exit code 2), cobra's own checks included.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := check(cmd, a)
			var ue usageError
			if err != nil && !errors.As(err, &ue) {
				return usageError{err}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// rewriteArgs turns the command line into one that cobra can parse.
//
// The article's spelling "kv DIR VERB args" becomes "kv VERB DIR args":
// when the first positional argument is not a command and the second is,
// they swap. A positional argument that is a negative number ("kv data
// add c -5") would be taken for a flag: the positional arguments then go
// after a "--". Cobra's hidden completion commands (__complete and
// __completeNoDesc, which the shell scripts of "kv completion" run) are
// rewritten as the command line they complete (rewriteCompletion).
func rewriteArgs(root *cobra.Command, args []string) []string {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return append([]string{args[0]}, rewriteCompletion(root, args[1:])...)
	}
	return negativeArgs(root, swapDirVerb(root, args))
}

// valuedFlags returns the flags of every command that take a value, as
// they are spelled on the command line.
func valuedFlags(root *cobra.Command) map[string]bool {
	valued := map[string]bool{}
	add := func(f *pflagFlag) {
		if f.NoOptDefVal == "" {
			valued["--"+f.Name] = true
			if f.Shorthand != "" {
				valued["-"+f.Shorthand] = true
			}
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return valued
}

// positionals returns the indexes of the positional arguments in args
// before any "--", skipping flags and their values.
func positionals(valued map[string]bool, args []string) []int {
	var pos []int
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 && !isNegative(a) {
			if !strings.Contains(a, "=") && valued[a] {
				i++
			}
			continue
		}
		pos = append(pos, i)
	}
	return pos
}

// isNegative reports whether a starts as a negative number does, which
// no flag of kv does.
func isNegative(a string) bool { return len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9' }

// swapDirVerb swaps the first two positional arguments when the first
// is not a command and the second is, or when the first is a directory
// that exists: then an unknown second ("kv data dmup") is the command
// that cobra reports as unknown, with its suggestions ("did you mean
// dump?"), rather than the directory.
func swapDirVerb(root *cobra.Command, args []string) []string {
	pos := positionals(valuedFlags(root), args)
	if len(pos) < 2 || isCommand(root, args[pos[0]]) {
		return args
	}
	if !isCommand(root, args[pos[1]]) && !isDir(args[pos[0]]) {
		return args
	}
	out := append([]string(nil), args...)
	out[pos[0]], out[pos[1]] = args[pos[1]], args[pos[0]]
	return out
}

// negativeArgs moves the positional arguments after "--" when one of
// them is a negative number: "add data c -5 --json" becomes "add --json
// -- data c -5". The command's name stays in front, where cobra looks
// for it. "kv DIR lock", whose "--" starts the command it runs, is left
// alone.
func negativeArgs(root *cobra.Command, args []string) []string {
	pos := positionals(valuedFlags(root), args)
	if len(pos) < 2 || !isCommand(root, args[pos[0]]) || args[pos[0]] == "lock" {
		return args
	}
	found := false
	for _, i := range pos[1:] {
		found = found || isNegative(args[i])
	}
	if !found {
		return args
	}
	isPos := map[int]bool{}
	for _, i := range pos {
		isPos[i] = true
	}
	out := []string{args[pos[0]]}
	var rest []string
	end := slices.Index(args, "--")
	if end < 0 {
		end = len(args)
	}
	for i := 0; i < end; i++ {
		switch {
		case i == pos[0]:
		case isPos[i]:
			rest = append(rest, args[i])
		default:
			out = append(out, args[i])
		}
	}
	out = append(out, "--")
	out = append(out, rest...)
	if end < len(args) {
		out = append(out, args[end+1:]...)
	}
	return out
}

// rewriteCompletion rewrites the words that a completion script asks
// about (the last one is the word being completed, maybe empty) as
// rewriteArgs rewrites a command line, so that the completion is the
// one of the command that would run: "kv data put k<TAB>" completes the
// key of put, never runs it, and never creates a store named
// "__complete". "kv DIR <TAB>" completes the commands.
func rewriteCompletion(root *cobra.Command, words []string) []string {
	if len(words) == 0 {
		return words
	}
	done := words[:len(words)-1]
	pos := positionals(valuedFlags(root), done)
	switch {
	case len(pos) == 0 || isCommand(root, done[pos[0]]):
		return words
	case len(pos) == 1:
		// "kv DIR <TAB>": what comes next is a command, not another
		// directory (completeFirst).
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[afterDir] = "true"
		out := append([]string(nil), done[:pos[0]]...)
		out = append(out, done[pos[0]+1:]...)
		return append(out, words[len(words)-1])
	}
	return append(swapDirVerb(root, done), words[len(words)-1])
}

// isDir reports whether name is a directory that exists.
func isDir(name string) bool {
	fi, err := vfs.OS.Stat(name)
	return err == nil && fi.IsDir()
}

func isCommand(root *cobra.Command, name string) bool {
	if name == "help" || name == "completion" {
		return true
	}
	for _, c := range root.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return true
		}
	}
	return false
}

// args checks the number of positional arguments as a usage error.
func args(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < min || (max >= 0 && len(a) > max) {
			return usagef("%s: wrong number of arguments\nUsage: %s", cmd.Name(), useLine(cmd))
		}
		return nil
	}
}
