package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

func init() {
	scriptCmds["ttyrun"] = ttyrun
}

// openPTY opens a pseudo-terminal pair: what is written to tty is read
// from master.
func openPTY() (master, tty *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// ttyrun [-stdin FILE] PROG ARGS...: run PROG with its stderr on a
// terminal (a pseudo-terminal) and its stdin from FILE (or nothing); the
// script's stdout is PROG's, its stderr what PROG wrote to the terminal.
func ttyrun(ts *testscript.TestScript, neg bool, args []string) {
	stdin := ""
	if len(args) > 2 && args[0] == "-stdin" {
		stdin, args = args[1], args[2:]
	}
	if len(args) == 0 {
		ts.Fatalf("usage: ttyrun [-stdin FILE] PROG ARGS...")
	}
	prog := args[0]
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		if p := filepath.Join(dir, args[0]); fileExists(p) {
			prog = p
			break
		}
	}
	master, tty, err := openPTY()
	ts.Check(err)
	defer master.Close()
	cmd := exec.Command(prog, args[1:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = append(os.Environ(), "PATH="+ts.Getenv("PATH"), "KV_PROGRESS_DELAY="+ts.Getenv("KV_PROGRESS_DELAY"))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if stdin != "" {
		f, err := os.Open(ts.MkAbs(stdin))
		ts.Check(err)
		defer f.Close()
		cmd.Stdin = f
	}
	var term bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&term, master) // ends with EIO once the terminal is closed
		close(copied)
	}()
	runErr := cmd.Run()
	tty.Close()
	<-copied
	ts.Stdout().Write(stdout.Bytes())
	ts.Stderr().Write(term.Bytes())
	ts.Logf("[terminal]\n%s", strings.ReplaceAll(term.String(), "\r", "\\r"))
	if (runErr != nil) != neg {
		ts.Fatalf("ttyrun %s: %v", strings.Join(args, " "), runErr)
	}
}

func fileExists(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && !fi.IsDir()
}
