package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether process pid runs: it exists and is not a
// zombie (a container's init may never reap the orphans it inherits).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows
	// its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// waitGone waits up to 10 s for every pid to stop running and returns
// those that still do.
func waitGone(pids []int) []int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pids(c *Cluster) []int {
	var out []int
	for _, m := range c.Members {
		out = append(out, m.PID())
	}
	return out
}

// TestCloseStopsEveryMember: Close leaves no member running, a paused
// one included.
func TestCloseStopsEveryMember(t *testing.T) {
	bin, err := BuildMember(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ps := pids(c)
	c.Members[0].Stop()
	c.Close()
	if left := waitGone(ps); len(left) > 0 {
		t.Fatalf("members %v still run after Close", left)
	}
}

// TestMembersDieWithTheirParent: a process that started a cluster and
// was killed before it could close it (a test binary past its -timeout)
// leaves no member running, a paused one included. The process is this
// test binary run again as TestClusterChild.
func TestMembersDieWithTheirParent(t *testing.T) {
	bin, err := BuildMember(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterChild$")
	cmd.Env = append(os.Environ(), "CLUSTER_CHILD_BIN="+bin, "CLUSTER_CHILD_DIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var ps []int
	select {
	case l, ok := <-lines:
		f, found := strings.CutPrefix(l, "pids ")
		if !ok || !found {
			t.Fatalf("child: %q", l)
		}
		for _, s := range strings.Fields(f) {
			p, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
	case <-time.After(time.Minute):
		t.Fatal("child started no cluster within a minute")
	}
	if len(ps) != 3 {
		t.Fatalf("child's members: %v", ps)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := waitGone(ps); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Fatalf("members %v of %v outlived the process that started them", left, ps)
	}
}

// TestClusterChild starts a cluster, pauses a member, prints the
// members' pids and waits to be killed; it runs only as
// TestMembersDieWithTheirParent's child.
func TestClusterChild(t *testing.T) {
	bin := os.Getenv("CLUSTER_CHILD_BIN")
	if bin == "" {
		t.Skip("run by TestMembersDieWithTheirParent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Bin: bin, Dir: os.Getenv("CLUSTER_CHILD_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	c.Members[1].Stop()
	ps := pids(c)
	fmt.Printf("pids %d %d %d\n", ps[0], ps[1], ps[2])
	time.Sleep(2 * time.Minute) // killed long before
	c.Close()
}
