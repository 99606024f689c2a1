package crashsim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"path"
	"slices"
	"sort"

	"github.com/kvstore/kv/vfs"
)

// Model names a crash model: which states a crash can leave (the package
// doc lists the models and what is checked on each state).
type Model string

// Crash models.
const (
	// Process: the current state after k events (the page cache outlives
	// the process).
	Process Model = "process"
	// Machine: the durable state plus, per file, any prefix of its
	// unsynced writes in issue order, the last possibly torn at a 512-byte
	// boundary, plus any prefix of the unsynced namespace operations.
	Machine Model = "machine"
	// Pessimistic: any subset of a file's unsynced 4 KiB pages (missing
	// pages read as zeros) and any subset of the unsynced namespace
	// operations that respects their order.
	Pessimistic Model = "pessimistic"
	// FsyncFailure: the k-th sync fails and its writes are lost for good;
	// states are the machine crashes of that run.
	FsyncFailure Model = "fsync-failure"
)

// Models lists the models in report order.
func Models() []Model { return []Model{Process, Machine, Pessimistic, FsyncFailure} }

// State is a data directory's files: base name to contents.
type State map[string][]byte

var hashSeed = maphash.MakeSeed()

// Hash identifies the state by content.
func (s State) Hash() uint64 {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	var h maphash.Hash
	h.SetSeed(hashSeed)
	var lb [8]byte
	for _, n := range names {
		h.WriteString(n)
		binary.LittleEndian.PutUint64(lb[:], uint64(len(s[n])))
		h.Write(lb[:])
		h.Write(s[n])
	}
	return h.Sum64()
}

// Names returns the file names, sorted.
func (s State) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fileOp is a change to a file's contents.
type fileOp struct {
	kind string // write, truncate, preallocate
	off  int64
	data []byte
	size int64
}

// apply returns b after op, never modifying b.
func (op fileOp) apply(b []byte) []byte {
	switch op.kind {
	case "write":
		end := op.off + int64(len(op.data))
		out := make([]byte, max(int64(len(b)), end))
		copy(out, b)
		copy(out[op.off:], op.data)
		return out
	case "truncate":
		if op.size <= int64(len(b)) {
			return b[:op.size:op.size]
		}
		out := make([]byte, op.size)
		copy(out, b)
		return out
	case "preallocate":
		if end := op.off + op.size; end > int64(len(b)) {
			out := make([]byte, end)
			copy(out, b)
			return out
		}
	}
	return b
}

type inode struct {
	cur, durable []byte
	pending      []fileOp // since the last successful sync
}

type nsOp struct {
	kind     string // create, rename, unlink
	name, to string
	inode    int
}

// fsModel replays events on one directory and produces crash states.
type fsModel struct {
	dir     string
	inodes  map[int]*inode
	cur     map[string]int
	durable map[string]int
	pending []nsOp
}

// newModel starts from initial, all durable, with inodes numbered as
// vfs.NewRecorder numbers them for initial.Names().
func newModel(dir string, initial State) *fsModel {
	m := &fsModel{dir: path.Clean(dir), inodes: map[int]*inode{}, cur: map[string]int{}, durable: map[string]int{}}
	for i, n := range initial.Names() {
		m.inodes[i+1] = &inode{cur: initial[n], durable: initial[n]}
		m.cur[n], m.durable[n] = i+1, i+1
	}
	return m
}

// local returns the base name of p if it is in the modelled directory.
func (m *fsModel) local(p string) (string, bool) {
	p = path.Clean(p)
	if path.Dir(p) != m.dir {
		return "", false
	}
	return path.Base(p), true
}

func (m *fsModel) node(id int) *inode {
	n, ok := m.inodes[id]
	if !ok {
		n = &inode{}
		m.inodes[id] = n
	}
	return n
}

// apply replays one event.
func (m *fsModel) apply(e vfs.Event) error {
	switch e.Op {
	case "write", "truncate", "preallocate":
		if _, ok := m.local(e.Path); !ok {
			return nil
		}
		n := m.node(e.Inode)
		op := fileOp{kind: e.Op, off: e.Off, data: e.Data, size: e.Size}
		n.cur = op.apply(n.cur)
		n.pending = append(n.pending, op)
	case "fdatasync":
		n := m.node(e.Inode)
		for _, op := range n.pending {
			n.durable = op.apply(n.durable)
		}
		n.pending = nil
	case "fdatasync-failed":
		// The kernel marked the dirty pages clean: these writes never
		// reach the disk, and a later sync does not bring them back,
		// though every read in this boot returns them. Size changes
		// (truncate, preallocate) are the file system's metadata, which
		// its journal commits later: they stay pending.
		n := m.node(e.Inode)
		var keep []fileOp
		for _, op := range n.pending {
			if op.kind != "write" {
				keep = append(keep, op)
			}
		}
		n.pending = keep
	case "fsync":
		if path.Clean(e.Path) == m.dir {
			m.durable = maps(m.cur)
			m.pending = nil
		}
	case "create":
		if name, ok := m.local(e.Path); ok {
			m.inodes[e.Inode] = &inode{}
			m.cur[name] = e.Inode
			m.pending = append(m.pending, nsOp{kind: "create", name: name, inode: e.Inode})
		}
	case "rename":
		from, ok1 := m.local(e.Path)
		to, ok2 := m.local(e.To)
		if !ok1 || !ok2 {
			return fmt.Errorf("crashsim: rename across directories: %s", e)
		}
		m.cur[to] = m.cur[from]
		delete(m.cur, from)
		m.pending = append(m.pending, nsOp{kind: "rename", name: from, to: to})
	case "unlink":
		if name, ok := m.local(e.Path); ok {
			delete(m.cur, name)
			m.pending = append(m.pending, nsOp{kind: "unlink", name: name})
		}
	}
	return nil
}

func maps(in map[string]int) map[string]int {
	out := make(map[string]int, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// processState is the current state.
func (m *fsModel) processState() State {
	s := State{}
	for name, id := range m.cur {
		s[name] = m.inodes[id].cur
	}
	return s
}

// entries applies the first k pending namespace operations to the durable
// entries (or the ones chosen by keep, when it is not nil).
func (m *fsModel) entries(k int, keep []bool) map[string]int {
	e := maps(m.durable)
	for i, op := range m.pending[:k] {
		if keep != nil && !keep[i] {
			continue
		}
		switch op.kind {
		case "create":
			e[op.name] = op.inode
		case "rename":
			id, ok := e[op.name]
			if !ok {
				continue // its source did not survive: the rename cannot have
			}
			e[op.to] = id
			delete(e, op.name)
		case "unlink":
			delete(e, op.name)
		}
	}
	return e
}

// contentChoices lists the contents a file can have after a machine crash:
// its durable contents with each prefix of its pending operations, the last
// write possibly torn at a 512-byte boundary.
//
// A write of zeros over zeros or past the end (the log's reservation) is
// torn only at its first and last boundary: its other tears differ from
// those two only in how many zeros end the file, and a megabyte of them
// would otherwise make two thousand copies of the file.
func contentChoices(n *inode) [][]byte {
	out := [][]byte{n.durable}
	b := n.durable
	for _, op := range n.pending {
		if op.kind == "write" {
			first := (op.off/512 + 1) * 512
			end := op.off + int64(len(op.data))
			last := (end - 1) / 512 * 512
			zeros := zeroOver(b, op)
			for t := first; t < end; t += 512 {
				if zeros && t != first && t != last {
					continue
				}
				torn := fileOp{kind: "write", off: op.off, data: op.data[:t-op.off]}
				out = append(out, torn.apply(b))
			}
		}
		b = op.apply(b)
		out = append(out, b)
	}
	return out
}

// zeroOver reports whether op writes only zeros, over zeros of b or past
// its end.
func zeroOver(b []byte, op fileOp) bool {
	if !allZero(op.data) {
		return false
	}
	if op.off < int64(len(b)) {
		return allZero(b[op.off:min(int64(len(b)), op.off+int64(len(op.data)))])
	}
	return true
}

func allZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }

// machineStates enumerates the states a machine crash leaves now, or, past
// limit, a seeded sample of limit of them. sampled reports the latter.
func (m *fsModel) machineStates(limit int, rng *rand.Rand) (states []State, sampled bool) {
	type dim struct {
		id      int
		choices [][]byte
	}
	var dims []dim
	ids := make([]int, 0, len(m.inodes))
	for id := range m.inodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if n := m.inodes[id]; len(n.pending) > 0 {
			dims = append(dims, dim{id, contentChoices(n)})
		}
	}
	total := len(m.pending) + 1
	for _, d := range dims {
		total *= len(d.choices)
		if total > limit {
			break
		}
	}
	build := func(k int, pick []int) State {
		ents := m.entries(k, nil)
		s := State{}
		for name, id := range ents {
			s[name] = m.inodes[id].durable
			for i, d := range dims {
				if d.id == id {
					s[name] = d.choices[pick[i]]
				}
			}
		}
		return s
	}
	pick := make([]int, len(dims))
	if total <= limit {
		var rec func(i, k int)
		rec = func(i, k int) {
			if i == len(dims) {
				states = append(states, build(k, pick))
				return
			}
			for c := range dims[i].choices {
				pick[i] = c
				rec(i+1, k)
			}
		}
		for k := 0; k <= len(m.pending); k++ {
			rec(0, k)
		}
		return states, false
	}
	for range limit {
		for i, d := range dims {
			pick[i] = rng.IntN(len(d.choices))
		}
		states = append(states, build(rng.IntN(len(m.pending)+1), pick))
	}
	return states, true
}

// pessimisticStates samples states where any subset of each file's
// unsynced 4 KiB pages survived (lost pages read as zeros) and any subset
// of the unsynced namespace operations, in order.
func (m *fsModel) pessimisticStates(n int, rng *rand.Rand) []State {
	var states []State
	for range n {
		keep := make([]bool, len(m.pending))
		for i := range keep {
			keep[i] = rng.IntN(2) == 0
		}
		ents := m.entries(len(m.pending), keep)
		s := State{}
		for name, id := range ents {
			in := m.inodes[id]
			if len(in.pending) == 0 {
				s[name] = in.durable
				continue
			}
			s[name] = pageSubset(in.durable, in.cur, sizeOf(in, rng), rng)
		}
		states = append(states, s)
	}
	return states
}

// sizeOf picks the size a file is left with: the size it had at its last
// sync or after any of its unsynced operations. A size change (a truncate,
// a reservation) is the file system's metadata, made durable on its own
// schedule: a crash can keep a later write's page and lose an earlier
// truncate.
func sizeOf(n *inode, rng *rand.Rand) int {
	sizes := []int{len(n.durable)}
	b := n.durable
	for _, op := range n.pending {
		b = op.apply(b)
		sizes = append(sizes, len(b))
	}
	return sizes[rng.IntN(len(sizes))]
}

// pageSubset mixes durable and current contents page by page: each page
// that differs is taken from cur, or lost (zeros past the durable bytes of
// that page, the durable bytes within it kept), at random. The file has
// size bytes: past cur's end, what the durable contents held there (a
// truncate lost), or zeros.
func pageSubset(durable, cur []byte, size int, rng *rand.Rand) []byte {
	const page = 4096
	out := make([]byte, max(size, len(cur)))
	if len(durable) > len(cur) {
		copy(out[len(cur):], durable[len(cur):])
	}
	for off := 0; off < len(cur); off += page {
		end := min(off+page, len(cur))
		var d []byte
		if off < len(durable) {
			d = durable[off:min(end, len(durable))]
		}
		c := cur[off:end]
		if string(d) == string(c) || rng.IntN(2) == 0 {
			copy(out[off:end], c)
		} else {
			copy(out[off:end], d) // the rest of the page stays zero
		}
	}
	return out[:size]
}

// clone returns a copy of m that replays events independently of it.
// File contents are never modified in place, so the copy shares them.
func (m *fsModel) clone() *fsModel {
	c := &fsModel{dir: m.dir, inodes: make(map[int]*inode, len(m.inodes)), cur: maps(m.cur), durable: maps(m.durable),
		pending: slices.Clone(m.pending)}
	for id, n := range m.inodes {
		c.inodes[id] = &inode{cur: n.cur, durable: n.durable, pending: slices.Clone(n.pending)}
	}
	return c
}

// inodePaths returns the inode of each file in the directory now, by
// path, as vfs.NewRecorderInodes takes them.
func (m *fsModel) inodePaths() map[string]int {
	out := make(map[string]int, len(m.cur))
	for name, id := range m.cur {
		out[path.Join(m.dir, name)] = id
	}
	return out
}

// maxInode returns the highest inode number m knows.
func (m *fsModel) maxInode() int {
	n := 0
	for id := range m.inodes {
		n = max(n, id)
	}
	return n
}
