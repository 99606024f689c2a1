package cluster

import (
	"os/exec"
	"syscall"
)

// Command returns the command to run bin with args as a child that the
// kernel kills (SIGKILL) when this process dies, even paused (SIGSTOP):
// a test binary killed by its -timeout, or by a signal, leaves no etcd
// member or lock holder behind, holding ports and disk.
func Command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	// Pdeathsig follows the thread that forked the child; the Go
	// runtime keeps its threads until the process exits, as no
	// goroutine here locks one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
