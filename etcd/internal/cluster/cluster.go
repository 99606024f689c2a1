// Package cluster starts an etcd cluster on loopback for this module's
// tests and benchmarks: each member a process of its own (command
// etcdmember), on free 127.0.0.1 ports, with its data in a directory the
// caller gives, so that a member can be killed (SIGKILL), paused
// (SIGSTOP) and restarted on its data.
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BuildMember builds command etcdmember into dir and returns its path.
func BuildMember(dir string) (string, error) { return Build(dir, "etcdmember") }

// Build builds the command github.com/kvstore/kv/etcd/internal/NAME
// into dir and returns its path.
func Build(dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/kvstore/kv/etcd/internal/"+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// Config says how to start a cluster.
type Config struct {
	Bin     string // the etcdmember binary (BuildMember)
	Dir     string // members' data directories and logs go under it
	Members int    // 3 if 0
	// TickMs and ElectionMs are the members' heartbeat and election
	// timeout; 50 and 500 if 0. The minimum lease TTL follows: 1 s.
	TickMs, ElectionMs int
}

// Cluster is a running etcd cluster.
type Cluster struct {
	cfg     Config
	Members []*Member
}

// Member is one member's process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	dir       string
	args      []string
	bin       string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *os.File
}

// freePort returns a port of 127.0.0.1 that no one listened on a moment
// ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts the members and returns once every one serves, or with
// an error (the members started are stopped) when ctx ends first.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.TickMs == 0 {
		cfg.TickMs, cfg.ElectionMs = 50, 500
	}
	c := &Cluster{cfg: cfg}
	var initial []string
	for i := range cfg.Members {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", cp),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", pp),
			bin:       cfg.Bin,
		}
		m.dir = filepath.Join(cfg.Dir, m.Name)
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.args = []string{
			"-name", m.Name, "-data-dir", filepath.Join(m.dir, "data"),
			"-client", m.ClientURL, "-peer", m.PeerURL,
			"-initial-cluster", strings.Join(initial, ","),
			"-tick-ms", fmt.Sprint(cfg.TickMs), "-election-ms", fmt.Sprint(cfg.ElectionMs),
		}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return nil, err
		}
	}
	ready := make(chan error, len(c.Members))
	for _, m := range c.Members {
		go func() { ready <- m.start(ctx) }()
	}
	var errs []error
	for range c.Members {
		errs = append(errs, <-ready)
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// start starts the member's process and waits for its "ready".
func (m *Member) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(m.dir, "member.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := Command(m.bin, m.args...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.done, m.log = cmd, done, logf
	m.mu.Unlock()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	select {
	case l := <-lines:
		if l != "ready" {
			return fmt.Errorf("%s: %q", m.Name, l)
		}
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready: %s", m.Name, m.LogTail())
	case <-ctx.Done():
		m.Kill()
		return fmt.Errorf("%s not ready: %w: %s", m.Name, ctx.Err(), m.LogTail())
	}
}

// LogTail returns the end of the member's log.
func (m *Member) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "member.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func (m *Member) signal(sig syscall.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && m.cmd.Process != nil {
		m.cmd.Process.Signal(sig)
	}
}

// PID returns the member's process id, 0 when it is not running.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	select {
	case <-m.done:
		return 0
	default:
	}
	return m.cmd.Process.Pid
}

// Kill kills the member's process (SIGKILL) and waits for it to exit.
func (m *Member) Kill() {
	m.signal(syscall.SIGKILL)
	m.wait()
}

// Stop pauses the member's process (SIGSTOP): it keeps its sockets and
// answers nothing, as a stalled machine.
func (m *Member) Stop() { m.signal(syscall.SIGSTOP) }

// Cont resumes a paused member (SIGCONT).
func (m *Member) Cont() { m.signal(syscall.SIGCONT) }

func (m *Member) wait() {
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Restart starts a killed member again on its data.
func (m *Member) Restart(ctx context.Context) error {
	m.wait()
	return m.start(ctx)
}

// Endpoints returns the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client of every member; its caller closes it.
func (c *Cluster) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      nopLogger(),
	})
}

// Leader returns the index of the member that leads, asking each member
// that answers within ctx.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	cl, err := c.Client()
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	for {
		for i, m := range c.Members {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cl.Status(sctx, m.ClientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close kills every member (a paused one too) and waits for them.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.signal(syscall.SIGKILL)
	}
	for _, m := range c.Members {
		m.wait()
	}
}
