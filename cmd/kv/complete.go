package main

import (
	"path"
	"strings"
	"syscall"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/spf13/cobra"
)

// Shell completion ("kv completion bash|zsh|fish|powershell") asks kv
// for the words that may come next by running "kv __complete WORDS...",
// which rewriteArgs rewrites as it rewrites a command line. What kv
// offers: after "kv", the commands and the directories (for "kv DIR
// VERB"); after "kv DIR", the commands; after a command, a directory
// for DIR; after "kv DIR get|put|del|add|scan", the keys of
// the store in DIR. Completion never changes a file: it reads the store
// read-only through noWrites, without its lock, and offers nothing when
// DIR is not a store it can read.

// noWrites is the file system completion reads a store through: every
// operation that would change a file fails, and so does taking the lock
// (which creates LOCK), so that a read-only open goes on without it.
var noWrites vfs.FS = &vfs.Inject{FS: vfs.OS, Rule: func(op vfs.Op) error {
	if op.Kind.Mutates() || op.Kind == vfs.OpLock {
		return syscall.EROFS
	}
	return nil
}}

// maxCompletions bounds the keys offered.
const maxCompletions = 1000

// afterDir is the annotation of the root command that rewriteCompletion
// sets when the words it rewrote were "kv DIR <TAB>": the directory is
// given, and completeFirst offers none.
const afterDir = "kv-completion-after-dir"

// completeFirst completes the first word after "kv": cobra offers the
// commands, and this the directories whose path starts with prefix (a
// path as typed: "da", "stores/da", "../"), at most maxCompletions,
// hidden ones only when prefix names them. They are offered as words,
// not through the shell's directory completion, which would hide the
// commands.
func completeFirst(cmd *cobra.Command, a []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(a) != 0 || cmd.Annotations[afterDir] != "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	dir, base := path.Split(prefix)
	list := dir
	if list == "" {
		list = "."
	}
	names, err := noWrites.List(list)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, name := range names {
		if len(out) == maxCompletions {
			break
		}
		if !strings.HasPrefix(name, base) || strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		if fi, err := noWrites.Stat(path.Join(list, name)); err == nil && fi.IsDir() && shellSafe([]byte(dir+name)) {
			out = append(out, cobra.CompletionWithDesc(dir+name, "directory"))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeDir completes the DIR of a command whose only argument it is.
func completeDir(_ *cobra.Command, a []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(a) == 0 {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeDirKey completes DIR, then a key of the store in DIR.
func completeDirKey(_ *cobra.Command, a []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(a) {
	case 0:
		return nil, cobra.ShellCompDirectiveFilterDirs
	case 1:
		return completeKeys(a[0], prefix), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeKeys returns the keys of the store in dir that start with
// prefix and that a shell can take as they are, at most maxCompletions.
func completeKeys(dir, prefix string) []cobra.Completion {
	if fi, err := noWrites.Stat(dir); err != nil || !fi.IsDir() {
		return nil
	}
	s, err := kv.Open(dir, &kv.Options{ReadOnly: true, FS: noWrites})
	if err != nil {
		return nil
	}
	defer s.Close()
	var out []cobra.Completion
	for e := range s.ScanPrefix([]byte(prefix)) {
		if len(out) == maxCompletions {
			break
		}
		if shellSafe(e.Key) {
			out = append(out, string(e.Key))
		}
	}
	return out
}

// shellSafe reports whether key can be typed into a shell as it is: it
// is not empty, holds only printable ASCII without the characters a
// shell treats specially, and does not start with a double quote (which
// kv reads as Go quoting).
func shellSafe(key []byte) bool {
	if len(key) == 0 || key[0] == '"' || key[0] == '-' || key[0] == '~' || key[0] == '#' {
		return false
	}
	for _, c := range key {
		if c <= ' ' || c >= 0x7f {
			return false
		}
		switch c {
		case '\'', '"', '\\', '$', '`', '!', '&', '|', ';', '<', '>', '(', ')', '{', '}', '[', ']', '*', '?':
			return false
		}
	}
	return true
}
