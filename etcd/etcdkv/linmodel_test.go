package etcdkv_test

// The model the linearizability tests check histories against: one key's
// state under get, put, add, delete and compare-and-set, in the style of
// kv/linearizability_test.go, with one addition: a write whose call
// returned an error of unknown outcome (a timeout while the leader was
// down) may or may not have taken effect, and, if it did, at a revision
// no one was told. The model is nondeterministic for it: the state after
// it is either the state before or the state with the write applied
// once, never twice; a read afterwards binds the revision it did not
// know.

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/anishathalye/porcupine"
)

type linKind uint8

const (
	linGet linKind = iota
	linPut
	linAdd
	linDelete
	linCASValue  // Txn{If: CompareValue(key, Equal, expect), Then: PutOp(key, value)}
	linCASModRev // Txn{If: CompareModRev(key, Equal, expectRev), Then: PutOp(key, value)}
)

func (k linKind) String() string {
	return [...]string{"get", "put", "add", "delete", "cas-value", "cas-modrev"}[k]
}

// linErr is the class of an operation's outcome.
type linErr uint8

const (
	errNone       linErr = iota
	errNotFound          // kv.ErrNotFound: nothing written
	errNotInteger        // kv.ErrNotInteger: nothing written
	errUnknown           // a write that failed with an unknown outcome: maybe applied, once
	errFailed            // a write that failed otherwise: not applied
)

type linInput struct {
	kind      linKind
	key       string
	value     string // put and CAS: the value written (unique per write)
	delta     int64  // add
	expect    string // cas-value
	expectRev int64  // cas-modrev
}

type linOutput struct {
	err       linErr
	found     bool // get
	value     string
	createRev int64
	modRev    int64
	version   int64
	rev       int64 // a committed write's revision
	committed bool
	n         int64 // add: the new value
	ok        bool  // cas: the compare held
}

// linState is one key's state. A write of unknown outcome that the model
// applied leaves modRev (and createRev, if it created the key) unknown
// until a read binds them. lastRev is the highest revision known of a
// write to the key, kept across deletes: a later write must commit
// above it.
type linState struct {
	exists         bool
	value          string
	createRev      int64
	modRev         int64
	createUnknown  bool
	modUnknown     bool
	version        int64
	lastRev        int64
	pendingUnknown int // applied writes whose revision is unknown since the last known one
}

// written is the state after a write of value, committed at rev (0:
// unknown).
func (s linState) written(value string, rev int64) linState {
	if !s.exists {
		s.version, s.createRev, s.createUnknown = 0, rev, rev == 0
	}
	s.exists, s.value, s.version = true, value, s.version+1
	if rev == 0 {
		s.modRev, s.modUnknown = 0, true
		s.pendingUnknown++
	} else {
		s.modRev, s.modUnknown, s.lastRev, s.pendingUnknown = rev, false, rev, 0
	}
	return s
}

// deleted is the state after a delete committed at rev (0: unknown).
func (s linState) deleted(rev int64) linState {
	n := linState{lastRev: s.lastRev, pendingUnknown: s.pendingUnknown + 1}
	if rev != 0 {
		n.lastRev, n.pendingUnknown = rev, 0
	}
	return n
}

// fresh reports whether a write told revision rev may follow s: above
// every revision known, and above the unknown ones applied since (each
// took a revision of its own).
func (s linState) fresh(rev int64) bool { return rev > s.lastRev+int64(s.pendingUnknown) }

// bindable reports whether rev may be the revision of the last of the
// writes of unknown revision applied since lastRev: the k-th of them
// committed at lastRev+k or later.
func (s linState) bindable(rev int64) bool { return rev >= s.lastRev+int64(s.pendingUnknown) }

// applied returns the states a write leaves: with a known outcome the
// one it reported (none if that is impossible); with an unknown one the
// state before and, if the write could apply, the state after.
func applied(s linState, in linInput, out linOutput) []any {
	if out.err == errFailed {
		return []any{s}
	}
	var next linState
	switch in.kind {
	case linPut:
		next = s.written(in.value, out.rev)
	case linAdd:
		var cur int64
		if s.exists {
			n, err := strconv.ParseInt(s.value, 10, 64)
			if err != nil {
				if out.err == errNotInteger || out.err == errUnknown {
					return []any{s}
				}
				return nil
			}
			cur = n
		}
		if out.err == errNone && out.n != cur+in.delta {
			return nil
		}
		next = s.written(strconv.FormatInt(cur+in.delta, 10), out.rev)
	case linDelete:
		if !s.exists {
			if out.err == errNotFound || out.err == errUnknown {
				return []any{s}
			}
			return nil
		}
		next = s.deleted(out.rev)
	case linCASValue, linCASModRev:
		holds := s.exists && s.value == in.expect
		if in.kind == linCASModRev {
			switch {
			case s.modUnknown && out.err == errNone && out.ok:
				// The compare held: the unknown revision was the one
				// compared, if it is above what is known.
				if !s.bindable(in.expectRev) {
					return nil
				}
				s.modRev, s.modUnknown, s.lastRev, s.pendingUnknown = in.expectRev, false, in.expectRev, 0
				if s.createUnknown {
					s.createRev, s.createUnknown = in.expectRev, false
				}
				holds = true
			case s.modUnknown:
				holds = false // the client compared a revision it read before the unknown write
			default:
				holds = s.modRev == in.expectRev // 0 when absent
			}
		}
		if !holds {
			if out.err == errUnknown || out.err == errNone && !out.ok && !out.committed {
				return []any{s}
			}
			return nil
		}
		if out.err == errNone && !out.ok {
			return nil
		}
		next = s.written(in.value, out.rev)
	}
	switch out.err {
	case errUnknown:
		return []any{s, next}
	case errNone:
		if !out.committed || !s.fresh(out.rev) {
			return nil
		}
		return []any{next}
	}
	return nil
}

func linStep(state, input, output any) []any {
	s, in, out := state.(linState), input.(linInput), output.(linOutput)
	if in.kind != linGet {
		return applied(s, in, out)
	}
	if !s.exists {
		if !out.found && out.err == errNotFound {
			return []any{s}
		}
		return nil
	}
	if out.err != errNone || !out.found || out.value != s.value || out.version != s.version {
		return nil
	}
	switch {
	case s.modUnknown:
		// Bind the revision of the writes of unknown outcome.
		if !s.bindable(out.modRev) {
			return nil
		}
		s.modRev, s.modUnknown, s.lastRev, s.pendingUnknown = out.modRev, false, out.modRev, 0
	case out.modRev != s.modRev:
		return nil
	}
	switch {
	case s.createUnknown:
		if out.createRev <= 0 || out.createRev > out.modRev {
			return nil
		}
		s.createRev, s.createUnknown = out.createRev, false
	case out.createRev != s.createRev:
		return nil
	}
	return []any{s}
}

// linModel is the per-key model, partitioned by key.
var linModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{linState{}} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		suffix := ""
		if out.err == errUnknown {
			suffix = " (unknown outcome)"
		}
		switch in.kind {
		case linGet:
			if !out.found {
				return fmt.Sprintf("get(%s) -> absent", in.key)
			}
			return fmt.Sprintf("get(%s) -> %q c%d m%d v%d", in.key, out.value, out.createRev, out.modRev, out.version)
		case linPut:
			return fmt.Sprintf("put(%s, %q) -> r%d%s", in.key, in.value, out.rev, suffix)
		case linAdd:
			return fmt.Sprintf("add(%s, %d) -> %d r%d err%d%s", in.key, in.delta, out.n, out.rev, out.err, suffix)
		case linDelete:
			return fmt.Sprintf("delete(%s) -> r%d err%d%s", in.key, out.rev, out.err, suffix)
		case linCASValue:
			return fmt.Sprintf("cas(%s, %q -> %q) -> %v r%d%s", in.key, in.expect, in.value, out.ok, out.rev, suffix)
		}
		return fmt.Sprintf("cas(%s, m%d -> %q) -> %v r%d%s", in.key, in.expectRev, in.value, out.ok, out.rev, suffix)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		if !s.exists {
			return fmt.Sprintf("absent (last r%d)", s.lastRev)
		}
		return fmt.Sprintf("%q c%d m%d v%d unknown-rev %v", s.value, s.createRev, s.modRev, s.version, s.modUnknown)
	},
}).ToModel()

// checkRevisions checks what the per-key model cannot: the acknowledged
// writes of every key have distinct revisions, in an order consistent
// with real time (a write that returned before another was called has
// the lower revision).
func checkRevisions(history []porcupine.Operation) error {
	var writes []porcupine.Operation
	seen := map[int64]bool{}
	for _, op := range history {
		out := op.Output.(linOutput)
		if out.err != errNone || !out.committed {
			continue
		}
		if seen[out.rev] {
			return fmt.Errorf("revision %d acknowledged twice", out.rev)
		}
		seen[out.rev] = true
		writes = append(writes, op)
	}
	sort.Slice(writes, func(i, j int) bool {
		return writes[i].Output.(linOutput).rev > writes[j].Output.(linOutput).rev
	})
	minRet, minRev := int64(1<<62), int64(0)
	for _, op := range writes {
		rev := op.Output.(linOutput).rev
		if minRet < op.Call {
			return fmt.Errorf("revision %d returned at %d, before revision %d was called at %d", minRev, minRet, rev, op.Call)
		}
		if op.Return < minRet {
			minRet, minRev = op.Return, rev
		}
	}
	return nil
}
