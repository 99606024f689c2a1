package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kvstore/kv/internal/forge"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kv": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI scripts in testdata/script: each is a txtar
// file of kv command lines and the output they must give.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script", Cmds: scriptCmds, Condition: scriptCondition})
}

// bashCompletion is the bash-completion package's script, which the bash
// completion script of cobra needs (its _get_comp_words_by_ref).
const bashCompletion = "/usr/share/bash-completion/bash_completion"

// scriptCondition answers the scripts' own conditions: [bash-completion]
// (the package is installed) and [root] (the tests run as root, for whom
// file permissions do not hold).
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "bash-completion":
		_, err := os.Stat(bashCompletion)
		return err == nil, nil
	case "root":
		return os.Geteuid() == 0, nil
	}
	if f, ok := scriptConditions[cond]; ok {
		return f(), nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// scriptConditions are the conditions a platform's test files add (see
// tmpfs_linux_test.go).
var scriptConditions = map[string]func() bool{}

// scriptCmds are the commands the scripts have besides testscript's own.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// sleep DURATION
	"sleep": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 1 || neg {
			ts.Fatalf("usage: sleep DURATION")
		}
		d, err := time.ParseDuration(args[0])
		ts.Check(err)
		time.Sleep(d)
	},
	// waitlocked DIR: wait (up to 20s) until another process holds the
	// writer's lock of the store in DIR.
	"waitlocked": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 1 || neg {
			ts.Fatalf("usage: waitlocked DIR")
		}
		name := filepath.Join(ts.MkAbs(args[0]), kv.LockName)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(name); err != nil {
				continue
			}
			f, err := vfs.OS.Lock(name, true)
			if errors.Is(err, vfs.ErrLocked) {
				return
			}
			if err == nil {
				f.Close()
			}
		}
		ts.Fatalf("no process took the lock of %s", args[0])
	},
	// segversion FILE V: make the header of segment FILE name format
	// version V, with checksums that hold (FORMAT.md, "Segment header"),
	// as a build of that version would write it.
	"segversion": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 || neg {
			ts.Fatalf("usage: segversion FILE V")
		}
		v, err := strconv.ParseUint(args[1], 10, 16)
		ts.Check(err)
		name := ts.MkAbs(args[0])
		b, err := os.ReadFile(name)
		ts.Check(err)
		forge.SegmentVersion(b, uint16(v))
		ts.Check(os.WriteFile(name, b, 0o600))
	},
	// waitfor FILE REGEXP: wait (up to 20s) until FILE holds a match.
	"waitfor": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 || neg {
			ts.Fatalf("usage: waitfor FILE REGEXP")
		}
		re, err := regexp.Compile("(?m)" + args[1])
		ts.Check(err)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && re.Match(b) {
				return
			}
		}
		ts.Fatalf("%s: no match for %q after 20s", args[0], args[1])
	},
}
