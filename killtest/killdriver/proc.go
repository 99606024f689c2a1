package killdriver

// The kill driver's process and directory helpers: start a real kv
// process, SIGKILL it, copy and fingerprint data directories.
// The driver is a test tool, so unlike the library it uses os and os/exec
// directly: the files it copies are the store's, but it never interprets
// them.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockName is the store's lock file, which every process that opens
// the directory rewrites with its pid: it says nothing about the data.
const lockName = "LOCK"

// proc is one run of the kv binary.
type proc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan error
	start  time.Time
}

// command prepares "kv [--bug B] [flags] args...". The caller may set
// Stdin or Stdout before startProc.
func command(ctx context.Context, binary, bug string, args ...string) *exec.Cmd {
	var a []string
	if bug != "" {
		a = append(a, "--bug", bug)
	}
	a = append(a, args...)
	cmd := exec.CommandContext(ctx, binary, a...)
	// A process group of its own, so that a ^C on the terminal reaches
	// only the driver, which stops (the context kills the child): a child
	// that died of SIGINT would pass for a failed recovery.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// startProc starts cmd, collecting stdout (unless the caller set it) and
// stderr.
func startProc(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	if cmd.Stdout == nil {
		cmd.Stdout = &p.stdout
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.start = time.Now()
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// kill sends SIGKILL. It is harmless when the process already exited.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
}

// wait waits for the process and reports whether SIGKILL ended it, and
// how long it lived. A non-nil error is the process's failure (a non-zero
// exit), with its stderr.
func (p *proc) wait() (killed bool, lived time.Duration, err error) {
	err = <-p.done
	lived = time.Since(p.start)
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, lived, nil
	}
	if err != nil {
		return false, lived, procError(err, p.stderr.String())
	}
	return false, lived, nil
}

// killAfter waits up to delay for the process to end by itself and
// SIGKILLs it otherwise. killed says which happened; the wait status, not
// the timer, decides, so that a process that exited just before the
// signal counts as finished.
func (p *proc) killAfter(delay time.Duration) (killed bool, lived time.Duration, err error) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case err := <-p.done:
		p.done <- err
	case <-t.C:
		p.kill()
	}
	return p.wait()
}

// procError words a failed process: its stderr's first line, or the
// exit status.
func procError(err error, stderr string) error {
	msg := strings.TrimSpace(stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		return err
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// runToEnd runs cmd to the end and returns its stdout.
func runToEnd(cmd *exec.Cmd) (string, time.Duration, error) {
	p, err := startProc(cmd)
	if err != nil {
		return "", 0, err
	}
	_, lived, err := p.wait()
	return p.stdout.String(), lived, err
}

// runWatched runs cmd to the end, as runToEnd does, and also returns
// when, after the start, it first changed dir (0 if it did not, or if
// the watch could not be set up).
func runWatched(cmd *exec.Cmd, dir string) (string, time.Duration, time.Duration, error) {
	w, werr := watchDir(dir)
	p, err := startProc(cmd)
	if err != nil {
		if werr == nil {
			w.stop()
		}
		return "", 0, 0, err
	}
	_, lived, err := p.wait()
	var wrote time.Duration
	if werr == nil {
		if t := w.stop(); !t.IsZero() {
			wrote = t.Sub(p.start)
		}
	}
	return p.stdout.String(), lived, wrote, err
}

// copyDir copies the regular files of src into dst, which it creates.
// A data directory is flat: subdirectories are an error.
func copyDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return fmt.Errorf("killdriver: %s: not a regular file", filepath.Join(src, e.Name()))
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// dirTree is a data directory's files by name, as content hashes, without
// the lock file.
type dirTree map[string][sha256.Size]byte

func readDirTree(dir string) (dirTree, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	t := dirTree{}
	for _, e := range ents {
		if e.Name() == lockName || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		t[e.Name()] = sha256.Sum256(b)
	}
	return t, nil
}

func (t dirTree) equal(u dirTree) bool {
	if len(t) != len(u) {
		return false
	}
	for n, h := range t {
		if g, ok := u[n]; !ok || g != h {
			return false
		}
	}
	return true
}

// names lists the files, with runs of consecutive log segments shortened
// to "log.000001-log.000042".
func (t dirTree) names() string {
	var segs []int
	var other []string
	for n := range t {
		if num, ok := strings.CutPrefix(n, "log."); ok && len(num) == 6 {
			if v, err := strconv.Atoi(num); err == nil {
				segs = append(segs, v)
				continue
			}
		}
		other = append(other, n)
	}
	slices.Sort(segs)
	slices.Sort(other)
	var out []string
	for i := 0; i < len(segs); {
		j := i
		for j+1 < len(segs) && segs[j+1] == segs[j]+1 {
			j++
		}
		if j-i >= 2 {
			out = append(out, fmt.Sprintf("log.%06d-log.%06d", segs[i], segs[j]))
		} else {
			for k := i; k <= j; k++ {
				out = append(out, fmt.Sprintf("log.%06d", segs[k]))
			}
		}
		i = j + 1
	}
	out = append(out, other...)
	if len(out) == 0 {
		return "(no files)"
	}
	return strings.Join(out, " ")
}

// scrub replaces the run's directory in an error message by DIR, so
// that the same failure in different runs reads the same.
func scrub(msg string, dirs ...string) string {
	for _, d := range dirs {
		if d != "" {
			msg = strings.ReplaceAll(msg, d, "DIR")
		}
	}
	return msg
}

// millis formats a duration in milliseconds as the report's header does:
// "5", "0.5", "41".
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms >= 10 {
		return strconv.FormatFloat(float64(int64(ms*10+0.5))/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(float64(int64(ms*100+0.5))/100, 'f', -1, 64)
}
