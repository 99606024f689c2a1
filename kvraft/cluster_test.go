package kvraft

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/vfs"
)

// nodeStore is one node's log and stable store as the cluster test
// crashes and reopens it.
type nodeStore interface {
	logs() raft.LogStore
	stable() raft.StableStore
	// crash stops the store's files from changing, as the death of the
	// process (or the machine) would; raft still runs on it until the
	// test shuts raft down.
	crash()
	// reopen closes what is left of the store and opens its files again,
	// as they were left at crash.
	reopen(tb testing.TB) nodeStore
	close()
}

// storeFactory makes node i's store.
type storeFactory struct {
	name string
	open func(tb testing.TB, i int) nodeStore
}

func storeFactories() []storeFactory {
	return []storeFactory{
		{"inmem", func(testing.TB, int) nodeStore { return inmemStore{raft.NewInmemStore()} }},
		{"raft-boltdb", func(tb testing.TB, i int) nodeStore {
			return openBolt(tb, filepath.Join(tb.TempDir(), fmt.Sprintf("node%d.db", i)))
		}},
		// A process crash: the kv store on its directory, whose file
		// system refuses every change from the crash on (the page cache
		// keeps what was written before it).
		{"kvraft", func(tb testing.TB, i int) nodeStore {
			return openCrashable(tb, filepath.Join(tb.TempDir(), fmt.Sprintf("node%d", i)), vfs.NewOS(0o600), nil)
		}},
		// A power loss: the same on kv's in-memory file system, reopened
		// on its CrashClone, which keeps only what was synced.
		{"kvraft-powerloss", func(tb testing.TB, i int) nodeStore {
			mem := vfs.NewMem()
			return openCrashable(tb, "node", mem, mem)
		}},
	}
}

// inmemStore is raft's InmemStore, kept across a crash: it is the test's
// control, whose "disk" survives everything.
type inmemStore struct{ s *raft.InmemStore }

func (s inmemStore) logs() raft.LogStore         { return s.s }
func (s inmemStore) stable() raft.StableStore    { return s.s }
func (s inmemStore) crash()                      {}
func (s inmemStore) reopen(testing.TB) nodeStore { return s }
func (s inmemStore) close()                      {}
func openBolt(tb testing.TB, path string) *boltStore {
	return &boltStore{path: path, s: mustBolt(tb, path)}
}
func (s *boltStore) logs() raft.LogStore            { return s.s }
func (s *boltStore) stable() raft.StableStore       { return s.s }
func (s *boltStore) crash()                         {}
func (s *boltStore) reopen(tb testing.TB) nodeStore { s.s.Close(); return openBolt(tb, s.path) }
func (s *boltStore) close()                         { s.s.Close() }
func (s *crashable) logs() raft.LogStore            { return s.s }
func (s *crashable) stable() raft.StableStore       { return s.s }
func (s *crashable) crash()                         { s.dead.Store(true) }
func (s *crashable) close()                         { s.s.Close() }

// boltStore is raft-boltdb v2, which commits (with its fsyncs) before
// each call returns: the file after raft shuts down is the file at the
// crash.
type boltStore struct {
	path string
	s    *raftboltdb.BoltStore
}

func mustBolt(tb testing.TB, path string) *raftboltdb.BoltStore {
	s, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// crashable is a kvraft Store on a file system that refuses every change
// once dead is set.
type crashable struct {
	dir  string
	base vfs.FS
	mem  *vfs.MemFS // base, when it is in memory: reopened on its CrashClone
	dead atomic.Bool
	s    *Store
}

func openCrashable(tb testing.TB, dir string, base vfs.FS, mem *vfs.MemFS) *crashable {
	c := &crashable{dir: dir, base: base, mem: mem}
	fs := &vfs.Inject{FS: base, Rule: func(op vfs.Op) error {
		if op.Kind.Mutates() && c.dead.Load() {
			return errors.New("crashed")
		}
		return nil
	}}
	s, err := Open(dir, &Options{KV: kv.Options{FS: fs}})
	if err != nil {
		tb.Fatal(err)
	}
	c.s = s
	return c
}

func (s *crashable) reopen(tb testing.TB) nodeStore {
	s.dead.Store(true)
	s.s.Close() // its writes fail: nothing reaches the files
	if s.mem != nil {
		clone := s.mem.CrashClone()
		return openCrashable(tb, s.dir, clone, clone)
	}
	return openCrashable(tb, s.dir, s.base, nil)
}

// countFSM applies commands that each carry an id (8 bytes): it counts
// them, and marks each id seen, so that a command applied twice or lost
// shows. Its snapshots carry its whole state.
type countFSM struct {
	mu    sync.Mutex
	state fsmState
}

type fsmState struct {
	Applied uint64 // commands applied, a retried one twice
	Seen    []byte // bit id set when command id was applied
	Last    uint64 // index of the last log applied
}

func (f *countFSM) Apply(l *raft.Log) any {
	if len(l.Data) != 8 {
		return fmt.Errorf("command of %d bytes", len(l.Data))
	}
	id := binary.LittleEndian.Uint64(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state.Applied++
	for uint64(len(f.state.Seen)) <= id/8 {
		f.state.Seen = append(f.state.Seen, 0)
	}
	f.state.Seen[id/8] |= 1 << (id % 8)
	f.state.Last = l.Index
	return nil
}

func (f *countFSM) get() fsmState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state
	st.Seen = append([]byte(nil), st.Seen...)
	return st
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	b, err := json.Marshal(f.get())
	return fsmSnap(b), err
}

func (f *countFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	var st fsmState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	return nil
}

type fsmSnap []byte

func (s fsmSnap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (s fsmSnap) Release() {}

// seenAll reports whether ids 1..n were all applied.
func (st fsmState) seenAll(n uint64) bool {
	for id := uint64(1); id <= n; id++ {
		if id/8 >= uint64(len(st.Seen)) || st.Seen[id/8]&(1<<(id%8)) == 0 {
			return false
		}
	}
	return true
}

// missing returns up to 10 of the ids 1..n not applied.
func (st fsmState) missing(n uint64) []uint64 {
	var ids []uint64
	for id := uint64(1); id <= n && len(ids) < 10; id++ {
		if id/8 >= uint64(len(st.Seen)) || st.Seen[id/8]&(1<<(id%8)) == 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

type node struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	trans *raft.InmemTransport
	fsm   *countFSM
	snaps raft.SnapshotStore // kept across restarts: the node's snapshot directory
	store nodeStore
	r     *raft.Raft
}

type cluster struct {
	tb    testing.TB
	nodes []*node
	conf  raft.Configuration
	// mu guards each node's r, which a restart replaces while the
	// appliers look for the leader.
	mu sync.Mutex
}

// raftOf returns n's raft, under c.mu.
func (c *cluster) raftOf(n *node) *raft.Raft {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.r
}

func raftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	// Snapshots and compaction every few hundred commands, so that a
	// restarted node needs a snapshot and the stores see DeleteRange.
	c.SnapshotThreshold = 512
	c.SnapshotInterval = 100 * time.Millisecond
	c.TrailingLogs = 128
	c.Logger = hclog.New(&hclog.LoggerOptions{Name: string(id), Level: hclog.Error, Output: io.Discard})
	return c
}

func newCluster(tb testing.TB, f storeFactory) *cluster {
	c := &cluster{tb: tb}
	for i := range 3 {
		n := &node{id: raft.ServerID(fmt.Sprintf("n%d", i)), snaps: raft.NewInmemSnapshotStore()}
		n.addr, n.trans = raft.NewInmemTransport("")
		n.store = f.open(tb, i)
		c.nodes = append(c.nodes, n)
		c.conf.Servers = append(c.conf.Servers, raft.Server{ID: n.id, Address: n.addr})
	}
	for _, n := range c.nodes {
		c.connect(n)
		if err := raft.BootstrapCluster(raftConfig(n.id), n.store.logs(), n.store.stable(), n.snaps, n.trans, c.conf); err != nil {
			tb.Fatal(err)
		}
		c.start(n)
	}
	tb.Cleanup(func() {
		for _, n := range c.nodes {
			n.r.Shutdown().Error()
			n.store.close()
		}
	})
	return c
}

func (c *cluster) connect(n *node) {
	for _, o := range c.nodes {
		if o != n {
			n.trans.Connect(o.addr, o.trans)
			o.trans.Connect(n.addr, n.trans)
		}
	}
}

func (c *cluster) start(n *node) {
	n.fsm = &countFSM{}
	r, err := raft.NewRaft(raftConfig(n.id), n.fsm, n.store.logs(), n.store.stable(), n.snaps, n.trans)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.mu.Lock()
	n.r = r
	c.mu.Unlock()
}

// crashRestart cuts n off, crashes its store, shuts its raft down, and
// starts it again on its store's files and its snapshots.
func (c *cluster) crashRestart(n *node) {
	for _, o := range c.nodes {
		o.trans.Disconnect(n.addr)
	}
	n.trans.DisconnectAll()
	n.store.crash()
	if err := n.r.Shutdown().Error(); err != nil {
		c.tb.Fatal(err)
	}
	n.store = n.store.reopen(c.tb)
	n.addr, n.trans = raft.NewInmemTransport(n.addr)
	c.connect(n)
	c.start(n)
}

func (c *cluster) leader(timeout time.Duration) *node {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if c.raftOf(n).State() == raft.Leader {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.tb.Fatalf("no leader after %v", timeout)
	return nil
}

func (c *cluster) follower() *node {
	l := c.leader(10 * time.Second)
	for _, n := range c.nodes {
		if n != l {
			return n
		}
	}
	panic("unreachable")
}

// apply applies commands from..to-1 with the given number of concurrent
// appliers, each retrying a command at the current leader until it is
// acknowledged (so a command of unknown outcome may apply twice, which
// the FSMs count but all agree on). during runs once a third is applied.
func (c *cluster) apply(from, to uint64, appliers int, during func()) {
	var next atomic.Uint64
	next.Store(from)
	var done atomic.Uint64
	var wg sync.WaitGroup
	duringDone := make(chan struct{})
	go func() {
		defer close(duringDone)
		if during == nil {
			return
		}
		for done.Load() < (to-from)/3 {
			time.Sleep(time.Millisecond)
		}
		during()
	}()
	for range appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := next.Add(1) - 1
				if id >= to {
					return
				}
				// A buffer of its own: raft keeps it (InmemStore
				// stores the slice itself).
				cmd := binary.LittleEndian.AppendUint64(nil, id)
				deadline := time.Now().Add(60 * time.Second)
				for {
					l := c.leader(30 * time.Second)
					if err := c.raftOf(l).Apply(cmd, 5*time.Second).Error(); err == nil {
						break
					}
					if time.Now().After(deadline) {
						c.tb.Errorf("command %d not applied in 60 s", id)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	<-duringDone
}

// converge waits until every node's FSM has applied ids 1..n and all
// hold the same state, and fails the test with each node's state if
// they do not within the timeout.
func (c *cluster) converge(n uint64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		var states []fsmState
		ok := true
		for _, nd := range c.nodes {
			st := nd.fsm.get()
			states = append(states, st)
			ok = ok && st.seenAll(n) && st.Applied == states[0].Applied && st.Last == states[0].Last
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for i, st := range states {
				c.tb.Errorf("node %d: applied %d, last index %d, all of 1..%d seen: %v (missing %v)", i, st.Applied, st.Last, n, st.seenAll(n), st.missing(n))
			}
			c.tb.FailNow()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCluster runs a 3-node raft cluster on each store: 10,000 commands
// from 16 appliers, a follower crashed and restarted while the others
// go on (with snapshots and compaction meanwhile, so that it restarts
// behind the leader's first index), then the leader, and checks that every
// FSM applies every command and that all agree, and that compaction ran.
func TestCluster(t *testing.T) {
	total := uint64(10000)
	for _, f := range storeFactories() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, f)
			c.leader(10 * time.Second)
			q := total / 4
			c.apply(1, 1+q, 16, nil)
			// A follower crashes while commands go on, and restarts
			// after a snapshot and a compaction passed it by.
			c.apply(1+q, 1+2*q, 16, func() {
				n := c.follower()
				c.crashRestart(n)
			})
			c.apply(1+2*q, 1+3*q, 16, nil)
			// The leader crashes between commands; a new one is elected
			// and the old one rejoins.
			c.crashRestart(c.leader(10 * time.Second))
			c.apply(1+3*q, 1+total, 16, nil)
			c.converge(total, 60*time.Second)
			for i, n := range c.nodes {
				first, err := n.store.logs().FirstIndex()
				if err != nil {
					t.Fatal(err)
				}
				if first <= 1 {
					t.Errorf("node %d: first index %d: the log was never compacted", i, first)
				}
			}
		})
	}
}
