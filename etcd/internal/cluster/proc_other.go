//go:build !linux

package cluster

import "os/exec"

// Command returns the command to run bin with args. Off Linux nothing
// ties the child's life to this process: a test binary that dies
// without running its cleanups leaves its members running.
func Command(bin string, args ...string) *exec.Cmd {
	return exec.Command(bin, args...)
}
